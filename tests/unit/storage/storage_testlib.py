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


def read_all(log: PartitionLog, offset: int | None = None, upto: int | None = None,
             max_bytes: int = BIG) -> list[tuple[int, int, int, bytes]]:
    """Every record at or after ``offset`` (default: log start) as plain tuples."""
    start = log.log_start_offset if offset is None else offset
    return [
        (o, ts, e, bytes(b))
        for o, ts, e, b in iter_records(log.read(start, max_bytes, upto))
        if o >= start
    ]


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
