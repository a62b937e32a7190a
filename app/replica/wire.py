"""Binary framing of a replica fetch answer (never base64-in-JSON).

The request is a small JSON object. The answer is a sequence of frames, one
per requested partition, in request order::

    frame   := header_len:u32be  header:JSON  records:bytes[header.records_bytes]

``header`` holds ``topic``, ``partition``, ``fetch_offset``, ``hw``,
``leader_epoch``, ``log_start_offset``, ``error`` (code or null),
``diverging_epoch`` (``[epoch, end_offset]`` or null) and ``records_bytes``.
``records`` are the leader's stored batch bytes, unchanged: whole batches
starting at ``fetch_offset``; the follower appends them as they are.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import orjson

from replication.core import DivergingEpoch, FetchResponse

CONTENT_TYPE = "application/x-tidelog-replica-fetch"
_LEN = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    """One partition's answer: the core's response and the batch bytes beside it."""

    topic: str
    partition: int
    response: FetchResponse
    records: bytes | memoryview


def encode_answers(answers: list[PartitionAnswer]) -> bytes:
    out: list[bytes | memoryview] = []
    for a in answers:
        r = a.response
        header = orjson.dumps({
            "topic": a.topic, "partition": a.partition, "fetch_offset": r.fetch_offset,
            "hw": r.hw, "leader_epoch": r.leader_epoch, "log_start_offset": r.log_start_offset,
            "error": r.error,
            "diverging_epoch": (
                [r.diverging_epoch.epoch, r.diverging_epoch.end_offset]
                if r.diverging_epoch is not None else None
            ),
            "records_bytes": len(a.records),
        })
        out += (_LEN.pack(len(header)), header, a.records)
    return b"".join(out)


def decode_answers(data: bytes) -> list[PartitionAnswer]:
    """Inverse of :func:`encode_answers`; ValueError on a truncated or malformed body."""
    mv = memoryview(data)
    pos = 0
    out: list[PartitionAnswer] = []
    while pos < len(mv):
        if pos + 4 > len(mv):
            raise ValueError("truncated frame length")
        (n,) = _LEN.unpack_from(mv, pos)
        pos += 4
        h: dict[str, Any] = orjson.loads(mv[pos : pos + n])
        pos += n
        size = int(h["records_bytes"])
        if pos + size > len(mv):
            raise ValueError("truncated records")
        records = mv[pos : pos + size]
        pos += size
        d = h["diverging_epoch"]
        resp = FetchResponse(
            fetch_offset=int(h["fetch_offset"]), hw=int(h["hw"]),
            leader_epoch=int(h["leader_epoch"]), log_start_offset=int(h["log_start_offset"]),
            error=h["error"],
            diverging_epoch=DivergingEpoch(int(d[0]), int(d[1])) if d is not None else None,
            records_available=size > 0,
        )
        out.append(PartitionAnswer(str(h["topic"]), int(h["partition"]), resp, records))
    return out
