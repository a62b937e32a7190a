"""Helpers shared by the storage tests: build records, read everything back, poke files."""

from __future__ import annotations

from pathlib import Path

from app.storage import LogConfig, PartitionLog, iter_records
from app.storage.batch import BatchHeader

Record = tuple[bytes | None, bytes, int]
BIG = 1 << 40


def body(n: int, pad: int = 0) -> bytes:
    return b'{"value":%d,"pad":"%s"}' % (n, b"x" * pad)


def records(first: int, count: int, ts: int | list[int], pad: int = 0) -> list[Record]:
    """``count`` records whose bodies name ``first .. first+count-1``."""
    stamps = ts if isinstance(ts, list) else [ts] * count
    return [
        (b"k%d" % (first + i) if i % 2 else None, body(first + i, pad), stamps[i])
        for i in range(count)
    ]


def unrender(offset: int, ts: int, epoch: int, served: bytes | memoryview) -> bytes:
    """The body a record was appended with, from its served JSON.

    Checks the served prefix carries exactly this record's offset, timestamp
    and leader epoch (what a fetch returns without decoding anything).
    """
    served = bytes(served)
    prefix = b'{"offset":%d,"timestamp":%d,"leader_epoch":%d,' % (offset, ts, epoch)
    assert served.startswith(prefix), (served[:80], prefix)
    return b"{" + served[len(prefix):]


def decoded(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """``(offset, timestamp, epoch, body)`` of every record in raw batches."""
    return [(o, ts, e, unrender(o, ts, e, b)) for o, ts, e, b in iter_records(data)]


def read_all(log: PartitionLog, offset: int | None = None, upto: int | None = None,
             max_bytes: int = BIG) -> list[tuple[int, int, int, bytes]]:
    """Every record at or after ``offset`` (default: log start) as plain tuples."""
    start = log.log_start_offset if offset is None else offset
    return [r for r in decoded(log.read(start, max_bytes, upto)) if r[0] >= start]


def batch_layout(data: bytes) -> list[BatchHeader]:
    out = []
    pos = 0
    while pos < len(data):
        h = BatchHeader.parse(data, pos)
        out.append(h)
        pos += h.size
    return out


def seg_files(directory: Path, suffix: str) -> list[Path]:
    return sorted(directory.glob(f"*{suffix}"))


def dir_snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def small_config(**kw: int | None) -> LogConfig:
    base: dict[str, int | None] = {
        "segment_bytes": 4096,
        "segment_ms": 10**12,
        "index_interval_bytes": 256,
    }
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]
