"""The record batch: the unit of write, storage and replication.

Layout (big-endian), 61-byte header then the records::

    base_offset      int64   offset of the first record
    batch_length     int32   bytes after this field (so a batch is 12 + batch_length)
    leader_epoch     int32   epoch of the leader that appended it
    magic            int8    format version, 1
    crc              uint32  CRC32C of every byte after this field
    attributes       int16   reserved (compression, transactional), 0
    last_offset_delta int32  record_count - 1
    base_timestamp   int64   smallest record timestamp (ms)
    max_timestamp    int64   largest record timestamp (ms)
    producer_id      int64   reserved for idempotent producers, -1
    producer_epoch   int16   reserved, -1
    base_sequence    int32   reserved, -1
    record_count     int32

Then a record table: ``record_count`` timestamps (int64), then
``record_count`` ends (uint32, where each record's JSON ends), then the
records themselves as the JSON text a fetch serves::

    {"offset":0,"timestamp":…,"leader_epoch":…,"key":…,"value":…,"headers":{…}},{"offset":1,…}

Record *i* is the JSON region ``[end[i-1] + 1, end[i])`` (``[0, end[0])`` for
the first), records separated by one comma. The leader renders each record
once, when it assigns the offset; afterwards a fetch of any run of records
of a batch is a single slice of this region (the commas included), so
serving records costs per batch, not per record, and nothing is decoded or
re-encoded. Followers copy batches unchanged, so every replica serves the
same bytes.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import crc32c

MAGIC = 1
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: enough to find the next batch
CRC_START = 21  # bytes before the first byte covered by the CRC
ENTRY_SIZE = 12  # per record in the table: timestamp int64 + end uint32
_TS = struct.Struct(">q")
_END = struct.Struct(">I")
_TAIL = struct.Struct(">hiqqqhii")
_FRONT = struct.Struct(">qiibI")
_PREFIX = struct.Struct(">qi")
_CRC = struct.Struct(">I")
MAX_BATCH_BYTES = 64 * 1024 * 1024
_LITTLE = sys.byteorder == "little"
assert array("q").itemsize == 8 and array("I").itemsize == 4


class CorruptBatchError(ValueError):
    """A batch failed a structural or CRC check."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including the 12-byte prefix."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
        """Parse and sanity-check the header at ``pos``; does not check the CRC."""
        if len(buf) - pos < HEADER_SIZE:
            raise CorruptBatchError("short batch header")
        h = cls(*HEADER.unpack_from(buf, pos))
        if h.magic != MAGIC:
            raise CorruptBatchError(f"bad magic {h.magic}")
        if not HEADER_SIZE - LOG_OVERHEAD <= h.batch_length <= MAX_BATCH_BYTES:
            raise CorruptBatchError(f"bad batch length {h.batch_length}")
        if h.record_count < 1 or h.last_offset_delta != h.record_count - 1:
            raise CorruptBatchError("bad record count")
        if HEADER_SIZE + h.record_count * ENTRY_SIZE > LOG_OVERHEAD + h.batch_length:
            raise CorruptBatchError("record table larger than the batch")
        if h.base_offset < 0:
            raise CorruptBatchError("negative base offset")
        return h


def peek_prefix(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """``(base_offset, total_size)`` of the batch at ``pos`` without full parsing."""
    base, length = _PREFIX.unpack_from(buf, pos)
    return base, LOG_OVERHEAD + length


def verify_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    end = pos + header.size
    if end > len(buf):
        raise CorruptBatchError("truncated batch")
    if crc32c.crc32c(memoryview(buf)[pos + CRC_START : end]) != header.crc:
        raise CorruptBatchError(f"CRC mismatch in batch at offset {header.base_offset}")


def render_record(offset: int, timestamp: int, leader_epoch: int, body: bytes) -> bytes:
    """The served JSON of a record: offset, timestamp and epoch, then ``body``'s fields.

    ``body`` is a JSON object (``{"key":…,"value":…,"headers":…}``).
    """
    return b'{"offset":%d,"timestamp":%d,"leader_epoch":%d,%b' % (  # type: ignore[str-format]
        offset, timestamp, leader_epoch, memoryview(body)[1:],
    )


def encode_batch(
    base_offset: int,
    leader_epoch: int,
    records: Sequence[tuple[Any, ...]],
) -> bytes:
    """Build a batch from ``(key_utf8 | None, body_json, timestamp_ms, ...)`` tuples.

    The key is inside ``body``; the separate key bytes are accepted for the
    caller's convenience (partitioning) and not stored twice.
    """
    n = len(records)
    if not n:
        raise ValueError("a batch needs at least one record")
    rendered: list[bytes] = []
    add = rendered.append
    stamps = array("q")
    ends = array("I")
    add_ts = stamps.append
    add_end = ends.append
    fmt = b'{"offset":%d,"timestamp":%d,"leader_epoch":%d,%b'
    end = -1
    offset = base_offset
    for rec in records:
        ts = rec[2]
        r = fmt % (offset, ts, leader_epoch, rec[1][1:])
        offset += 1
        end += len(r) + 1
        add_ts(ts)
        add_end(end)
        add(r)
    ts_min, ts_max = min(stamps), max(stamps)
    if _LITTLE:
        stamps.byteswap()
        ends.byteswap()
    tail = b"".join((
        _TAIL.pack(0, n - 1, ts_min, ts_max, -1, -1, -1, n), stamps.tobytes(), ends.tobytes(),
        b",".join(rendered),
    ))
    crc = crc32c.crc32c(tail)
    return _FRONT.pack(base_offset, 4 + 1 + 4 + len(tail), leader_epoch, MAGIC, crc) + tail


def _json_region(h: BatchHeader, pos: int) -> int:
    return pos + HEADER_SIZE + h.record_count * ENTRY_SIZE


def iter_records(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, int, memoryview]]:
    """Yield ``(offset, timestamp, leader_epoch, record_json)`` for every record of every batch.

    ``buf[pos:end]`` must hold whole batches (as returned by a log read).
    ``record_json`` is the served JSON object of the record.
    """
    mv = memoryview(buf)
    end = len(buf) if end is None else end
    ts_at = _TS.unpack_from
    end_at = _END.unpack_from
    while pos + HEADER_SIZE <= end:
        h = BatchHeader.parse(mv, pos)
        bend = pos + h.size
        if bend > end:
            raise CorruptBatchError("truncated batch")
        n = h.record_count
        tpos = pos + HEADER_SIZE
        epos = tpos + 8 * n
        region = _json_region(h, pos)
        base, epoch = h.base_offset, h.leader_epoch
        start = 0
        for i in range(n):
            (ts,) = ts_at(mv, tpos + 8 * i)
            (rend,) = end_at(mv, epos + 4 * i)
            yield base + i, ts, epoch, mv[region + start : region + rend]
            start = rend + 1
        pos = bend


def slice_records(
    buf: bytes | bytearray | memoryview,
    start_offset: int,
    upto_offset: int,
    max_records: int,
    max_bytes: int,
    min_one: bool = True,
) -> tuple[list[memoryview], int, int, int]:
    """Served JSON of the records in ``[start_offset, upto_offset)``, one slice per batch.

    Each slice is a comma-separated run of record objects, ready to join
    with commas into a JSON array. Stops at ``max_records`` or before
    ``max_bytes`` would be exceeded (with ``min_one`` the first record is
    taken whatever its size). Returns ``(slices, records, next_offset,
    bytes)``; ``next_offset`` is ``start_offset`` when nothing was taken.
    Cost is per batch (a bisect over the record table), not per record.
    """
    mv = memoryview(buf)
    out: list[memoryview] = []
    taken = size = 0
    nxt = start_offset
    pos, end = 0, len(buf)
    end_at = _END.unpack_from
    while pos + HEADER_SIZE <= end and taken < max_records:
        h = BatchHeader.parse(mv, pos)
        base = h.base_offset
        if base >= upto_offset:
            break
        last = h.next_offset  # exclusive
        if last <= start_offset:
            pos += h.size
            continue
        epos = pos + HEADER_SIZE + 8 * h.record_count  # the ends column
        region = _json_region(h, pos)
        first_i = max(0, start_offset - base)
        stop_i = min(h.record_count, upto_offset - base, first_i + (max_records - taken))
        begin = 0 if first_i == 0 else end_at(mv, epos + 4 * (first_i - 1))[0] + 1
        # Largest stop index within the byte budget: ends are increasing, so bisect.
        budget = max_bytes - size
        lo, hi = first_i, stop_i
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if end_at(mv, epos + 4 * (mid - 1))[0] - begin + 1 <= budget:  # +1: its comma
                lo = mid
            else:
                hi = mid - 1
        k = lo
        if k == first_i and min_one and not out and stop_i > first_i:
            k = first_i + 1  # one record whatever its size
        if k == first_i:
            break
        rend = end_at(mv, epos + 4 * (k - 1))[0]
        out.append(mv[region + begin : region + rend])
        taken += k - first_i
        size += rend - begin + 1
        nxt = base + k
        if k < stop_i or nxt >= upto_offset:
            break
        pos += h.size
    return out, taken, nxt, size


def iter_keyed_records(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, bytes | None, memoryview]]:
    """Like :func:`iter_records` but yields ``(offset, timestamp, key, record_json)``.

    Decodes each record's JSON to find the key: for tooling (compaction), not hot paths.
    """
    import orjson

    for off, ts, _epoch, rec in iter_records(buf, pos, end):
        key = orjson.loads(rec).get("key")
        yield off, ts, key.encode() if isinstance(key, str) else None, rec


def record_timestamps(buf: bytes | bytearray | memoryview, pos: int) -> Iterator[tuple[int, int]]:
    """Yield ``(offset, timestamp)`` of the records of the single batch at ``pos``."""
    h = BatchHeader.parse(buf, pos)
    tpos = pos + HEADER_SIZE
    for i in range(h.record_count):
        (ts,) = _TS.unpack_from(buf, tpos + 8 * i)
        yield h.base_offset + i, ts
