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

Each record: ``length uint32`` (bytes after it), ``offset_delta uint32``,
``timestamp int64``, ``key_length int32`` (-1 = null key), the key's UTF-8
bytes, then ``body``: the JSON object ``{"key":…,"value":…,"headers":{…}}``
exactly as it will be served. Keeping the body pre-rendered lets a fetch
build its response by splicing bytes instead of decoding and re-encoding
JSON, and lets replication copy batches without touching records at all.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c

MAGIC = 1
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: enough to find the next batch
CRC_START = 21  # bytes before the first byte covered by the CRC
RECORD = struct.Struct(">IIqi")
RECORD_OVERHEAD = RECORD.size  # 20
_PREFIX = struct.Struct(">qi")
_CRC = struct.Struct(">I")
MAX_BATCH_BYTES = 64 * 1024 * 1024


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


def encode_batch(
    base_offset: int,
    leader_epoch: int,
    records: Sequence[tuple[bytes | None, bytes, int]],
) -> bytes:
    """Build a batch from ``(key_utf8 | None, body_json, timestamp_ms)`` triples."""
    if not records:
        raise ValueError("a batch needs at least one record")
    parts: list[bytes] = [b""]
    pack = RECORD.pack
    ts_min = ts_max = records[0][2]
    for delta, (key, body, ts) in enumerate(records):
        if ts < ts_min:
            ts_min = ts
        elif ts > ts_max:
            ts_max = ts
        if key is None:
            parts.append(pack(RECORD_OVERHEAD - 4 + len(body), delta, ts, -1))
        else:
            parts.append(pack(RECORD_OVERHEAD - 4 + len(key) + len(body), delta, ts, len(key)))
            parts.append(key)
        parts.append(body)
    body_bytes = b"".join(parts)
    n = len(records)
    tail = struct.pack(">hiqqqhii", 0, n - 1, ts_min, ts_max, -1, -1, -1, n) + body_bytes
    crc = crc32c.crc32c(tail)
    batch_length = 4 + 1 + 4 + len(tail)
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, MAGIC, crc) + tail


def iter_records(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, int, memoryview]]:
    """Yield ``(offset, timestamp, leader_epoch, body)`` for every record of every batch.

    ``buf[pos:end]`` must hold whole batches (as returned by a log read).
    """
    mv = memoryview(buf)
    end = len(buf) if end is None else end
    unpack_rec = RECORD.unpack_from
    while pos + HEADER_SIZE <= end:
        h = BatchHeader.parse(mv, pos)
        bend = pos + h.size
        if bend > end:
            raise CorruptBatchError("truncated batch")
        rpos = pos + HEADER_SIZE
        base, epoch = h.base_offset, h.leader_epoch
        for _ in range(h.record_count):
            rlen, delta, ts, klen = unpack_rec(mv, rpos)
            bstart = rpos + RECORD_OVERHEAD + (klen if klen > 0 else 0)
            rpos += 4 + rlen
            yield base + delta, ts, epoch, mv[bstart:rpos]
        pos = bend


def iter_keyed_records(
    buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, bytes | None, memoryview]]:
    """Like :func:`iter_records` but yields ``(offset, timestamp, key, body)``."""
    mv = memoryview(buf)
    end = len(buf) if end is None else end
    while pos + HEADER_SIZE <= end:
        h = BatchHeader.parse(mv, pos)
        rpos = pos + HEADER_SIZE
        for _ in range(h.record_count):
            rlen, delta, ts, klen = RECORD.unpack_from(mv, rpos)
            kstart = rpos + RECORD_OVERHEAD
            key = bytes(mv[kstart : kstart + klen]) if klen >= 0 else None
            bstart = kstart + (klen if klen > 0 else 0)
            rpos += 4 + rlen
            yield h.base_offset + delta, ts, key, mv[bstart:rpos]
        pos += h.size


def record_timestamps(buf: bytes | bytearray | memoryview, pos: int) -> Iterator[tuple[int, int]]:
    """Yield ``(offset, timestamp)`` of the records of the single batch at ``pos``."""
    h = BatchHeader.parse(buf, pos)
    rpos = pos + HEADER_SIZE
    for _ in range(h.record_count):
        rlen, delta, ts, _k = RECORD.unpack_from(buf, rpos)
        rpos += 4 + rlen
        yield h.base_offset + delta, ts
