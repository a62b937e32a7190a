"""One segment: ``<base>.log`` of batches plus its sparse indexes.

Writes go through one ``O_APPEND`` file descriptor; reads use ``pread`` on
the same descriptor, so a reader thread never moves a shared file position.

Publication order (appends run on one thread, reads may run in others):
bytes are written, then index entries added, then ``size`` set, then
``next_offset`` set. A reader that saw ``next_offset`` therefore sees a
``size`` covering every batch below it, and never a half-written batch.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

from app.storage.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptBatchError,
    record_timestamps,
    verify_crc,
)
from app.storage.index import SegmentIndex

# Header through max_timestamp: enough to walk batches and answer time queries.
_HEAD = struct.Struct(">qiibIhiqq")
_HEAD_SIZE = _HEAD.size  # 43
_PREFIX = struct.Struct(">qi")
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_SCAN_CHUNK = 1 << 20
_WALK_CHUNK = 16384
# Index entries store offsets relative to the segment base as uint32.
MAX_RELATIVE_OFFSET = 2**32 - 1


def _next_offset(buf: bytes, pos: int) -> int:
    """Offset after the batch whose header starts at ``buf[pos]``."""
    fields = _HEAD.unpack_from(buf, pos)
    return int(fields[0]) + int(fields[6]) + 1


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


# (position, base_offset, next_offset, size, max_timestamp, leader_epoch)
WalkEntry = tuple[int, int, int, int, int, int]


class Segment:
    """A log file and its indexes; ``next_offset`` is the offset after its last record.

    An empty segment has ``next_offset == base_offset``, ``max_timestamp == -1``
    and ``rolling_base_ms is None``.
    """

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        name = segment_name(base_offset)
        self.log_path = directory / f"{name}.log"
        self.index = SegmentIndex(directory / f"{name}.index", directory / f"{name}.timeindex")
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base_offset
        self.max_timestamp = -1
        # Age for segment_ms is measured from here: the wall clock of the first
        # append in this process, or after a reopen the older of the first
        # batch's max timestamp and the file's mtime. Not record timestamps
        # alone: a producer sending old timestamps would roll every batch.
        self.rolling_base_ms: int | None = None
        self._bytes_since_index = 0
        self.dirty = False  # log bytes written since the last fsync
        self.index_unsynced = False  # index files saved since the last fsync
        self.index_suspect = False  # an entry did not match the log (see position_of)

    # ---- opening -------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> Segment:
        """A new empty segment; any file left under that name is emptied."""
        seg = cls(directory, base_offset, index_interval_bytes)
        if seg.size:
            os.ftruncate(seg.fd, 0)
            seg.size = 0
        seg.index.delete_files()
        seg.index.clear()
        return seg

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, index_interval_bytes: int, *, recover: bool
    ) -> tuple[Segment, int]:
        """Open an existing segment. Returns it and the number of bytes truncated.

        With ``recover`` the index files are ignored, every batch is
        CRC-checked and the file is truncated at the first torn, malformed
        or corrupt batch. Without it the index files are loaded and checked
        against the log; if they are missing or wrong, or the tail after the
        last entry is malformed, the segment is recovered as above.
        """
        seg = cls(directory, base_offset, index_interval_bytes)
        if not recover and seg.index.load(seg.size) and seg._index_matches_log():
            try:
                seg._load_tail_state()
                seg._init_rolling_base()
                return seg, 0
            except CorruptBatchError:
                pass
        return seg, seg.rebuild()

    def _index_matches_log(self) -> bool:
        """Spot-check index entries against batch headers (first, last, up to 64 between)."""
        n = len(self.index)
        if n == 0:
            return self.size == 0
        step = max(1, n // 64)
        for i in [*range(0, n, step), n - 1]:
            pos = self.index.positions[i]
            head = os.pread(self.fd, LOG_OVERHEAD, pos)
            if len(head) < LOG_OVERHEAD:
                return False
            base, _length = _PREFIX.unpack(head)
            if base != self.base_offset + self.index.rel_offsets[i]:
                return False
        return True

    def _reset_state(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self._bytes_since_index = 0
        self.rolling_base_ms = None

    def rebuild(self) -> int:
        """Scan and CRC-check the whole log, rebuild the indexes, truncate at the first bad batch.

        Returns the number of bytes cut off (0 when the file was intact).
        """
        self.index.clear()
        self._reset_state()
        valid_end = 0
        try:
            for pos, h in self._scan(0, self.base_offset, verify=True):
                self._track(pos, h)
                self.next_offset = h.next_offset
                valid_end = pos + h.size
        except CorruptBatchError:
            pass
        cut = self.size - valid_end
        if cut:
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
            self.dirty = True
        self._init_rolling_base()
        return cut

    def _load_tail_state(self) -> None:
        """Recover next_offset/max_timestamp/index spacing from the last index entry onward.

        Raises CorruptBatchError if the tail is torn or malformed.
        """
        n = len(self.index)
        start = self.index.positions[-1] if n else 0
        expected = self.base_offset + (self.index.rel_offsets[-1] if n else 0)
        next_offset = expected
        max_ts = self.index.ts_before[-1] if n else -1
        since = 0
        for _pos, h in self._scan(start, expected, verify=False):
            next_offset = h.next_offset
            max_ts = max(max_ts, h.max_timestamp)
            since += h.size
        self.max_timestamp = max_ts
        self._bytes_since_index = since
        self.next_offset = next_offset

    def _init_rolling_base(self) -> None:
        if self.size == 0:
            self.rolling_base_ms = None
            return
        first_batch_max_ts = _HEAD.unpack(os.pread(self.fd, _HEAD_SIZE, 0))[-1]
        mtime_ms = os.fstat(self.fd).st_mtime_ns // 1_000_000
        self.rolling_base_ms = min(first_batch_max_ts, mtime_ms)

    def _scan(
        self, start: int, expected: int, *, verify: bool
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` from ``start`` to the end, reading in large chunks.

        Raises CorruptBatchError at the first batch that is torn, malformed,
        does not continue the offsets (starting at ``expected``), would not
        fit the relative-offset index, or (with ``verify``) fails its CRC.
        """
        size = self.size
        pos = start
        buf = b""
        buf_start = start
        while pos < size:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, _SCAN_CHUNK, pos)
                buf_start, off = pos, 0
            h = BatchHeader.parse(buf, off)
            if pos + h.size > size:
                raise CorruptBatchError("torn batch at end of segment")
            if h.base_offset != expected:
                raise CorruptBatchError(f"batch at {h.base_offset} where {expected} was expected")
            if h.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                raise CorruptBatchError("batch offset too far from the segment base")
            if verify:
                if off + h.size > len(buf):
                    buf = os.pread(self.fd, max(_SCAN_CHUNK, h.size), pos)
                    buf_start, off = pos, 0
                verify_crc(buf, off, h)
            yield pos, h
            expected = h.next_offset
            pos += h.size

    def _track(self, pos: int, h: BatchHeader) -> None:
        """Index bookkeeping for a batch that now sits at ``pos`` (next_offset is the caller's)."""
        if pos == 0 or self._bytes_since_index >= self.index_interval_bytes:
            self.index.add(h.base_offset - self.base_offset, pos, self.max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += h.size
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp

    # ---- writing -------------------------------------------------------------------------
    def append(self, data: bytes | memoryview, headers: list[BatchHeader], now_ms: int) -> None:
        """Append one or more whole, already validated batches that continue this segment."""
        pos = self.size
        try:
            written = os.write(self.fd, data)
            while written < len(data):  # short writes are rare but legal
                written += os.write(self.fd, memoryview(data)[written:])
        except OSError:
            # ENOSPC/EIO midway: cut what was written so the file still ends
            # where ``size`` says (the next append lands there, O_APPEND).
            os.ftruncate(self.fd, pos)
            raise
        for h in headers:
            self._track(pos, h)
            pos += h.size
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms
        self.dirty = True
        self.size = pos
        self.next_offset = headers[-1].next_offset  # last: see the module docstring

    def seal(self) -> None:
        """The segment stops being active: persist its indexes for the next start.

        An index caught pointing at the wrong batch is not saved; its files
        are removed so the next start rebuilds them from the log.
        """
        if self.index_suspect:
            self.index.delete_files()
        elif self.index.unsaved:
            self.index.save()
            self.index_unsynced = True

    def truncate_to(self, offset: int) -> None:
        """Remove the batch containing ``offset`` and every later one.

        Truncation happens at batch boundaries: if ``offset`` falls inside a
        batch the whole batch goes, so ``next_offset`` may end below ``offset``.
        No-op when ``offset >= next_offset``. Caller holds the exclusive lock.
        """
        if offset >= self.next_offset:
            return
        pos = 0 if offset <= self.base_offset else self.position_of(offset)
        if pos is None:
            return
        os.ftruncate(self.fd, pos)
        self.size = pos
        self.dirty = True
        self.index.truncate_to_position(pos)
        if pos == 0:
            self.index.clear()
            self._reset_state()
        else:
            self._load_tail_state()
        self.index.save()
        self.index_unsynced = True

    # ---- reading -------------------------------------------------------------------------
    def walk(self, start: int = 0, limit: int | None = None) -> Iterator[WalkEntry]:
        """Walk batch headers from position ``start`` up to ``limit`` (default: the size).

        Stops early at a malformed length instead of looping.
        """
        limit = self.size if limit is None else limit
        pos = start
        buf = b""
        buf_start = start
        while pos < limit:
            off = pos - buf_start
            if off + _HEAD_SIZE > len(buf):
                buf = os.pread(self.fd, _WALK_CHUNK, pos)
                buf_start, off = pos, 0
                if len(buf) < _HEAD_SIZE:
                    return
            base, length, epoch, _m, _c, _a, lod, _bts, mts = _HEAD.unpack_from(buf, off)
            if length < _MIN_LENGTH:
                return
            size = LOG_OVERHEAD + length
            yield pos, base, base + lod + 1, size, mts, epoch
            pos += size

    def position_of(self, offset: int, limit: int | None = None) -> int | None:
        """File position of the batch containing ``offset``; None if it is not below ``limit``.

        If the index entry used does not point at the batch it names (a
        corrupt index file that passed the load checks) the log is scanned
        from the start instead, so a bad index costs time, never wrong data.
        """
        limit = self.size if limit is None else limit
        for pos, _base, nxt, _size, _ts, _e in self._walk_from_entry(
            self.index.floor(offset - self.base_offset), limit
        ):
            if nxt > offset:
                return pos
        return None

    def _walk_from_entry(self, i: int, limit: int) -> Iterator[WalkEntry]:
        """Walk from index entry ``i`` (-1: the start), or from the start if it is wrong."""
        if i < 0:
            yield from self.walk(0, limit)
            return
        start, expect = self.index.positions[i], self.base_offset + self.index.rel_offsets[i]
        it = self.walk(start, limit)
        first = next(it, None)
        if first is None:
            return
        if first[1] != expect:
            self.index_suspect = True
            yield from self.walk(0, limit)
            return
        yield first
        yield from it

    def read(self, offset: int, max_bytes: int, upto_offset: int, *, min_one: bool = True) -> bytes:
        """Whole batches from the one containing ``offset``, at most ``max_bytes`` in all.

        With ``min_one`` the first batch is returned even if it is larger
        than ``max_bytes``. Batches that start at or past ``upto_offset`` are
        never returned. Returns b"" when nothing qualifies.
        """
        return self.read_with_next(offset, max_bytes, upto_offset, min_one=min_one)[0]

    def read_with_next(
        self, offset: int, max_bytes: int, upto_offset: int, *, min_one: bool = True
    ) -> tuple[bytes, int]:
        """Like :meth:`read`, plus the offset after the last batch returned (-1 if none).

        The log reads on into the next segment only when that offset is
        this segment's end: a read cut short by ``max_bytes`` must not skip
        the rest of the segment.
        """
        limit = self.size  # snapshot: appends may race with a reader thread
        if upto_offset <= self.base_offset:
            return b"", -1
        start = self.position_of(offset, limit)
        if start is None:
            return b"", -1
        hi = limit
        j = self.index.floor(upto_offset - self.base_offset) + 1
        if j < len(self.index):  # that entry's batch starts past upto_offset
            hi = min(hi, self.index.positions[j])
        buf = os.pread(self.fd, min(max(max_bytes, 0), hi - start), start) if hi > start else b""
        end = 0
        last = -1
        n = len(buf)
        while end + _HEAD_SIZE <= n:
            base, length = _PREFIX.unpack_from(buf, end)
            nxt = end + LOG_OVERHEAD + length
            if base >= upto_offset or nxt > n:
                break
            last, end = end, nxt
        if end:
            return (buf if end == n else buf[:end]), _next_offset(buf, last)
        if not min_one:
            return b"", -1
        head = os.pread(self.fd, _HEAD_SIZE, start)
        if len(head) < _HEAD_SIZE:
            return b"", -1
        base, length = _PREFIX.unpack_from(head)
        if base >= upto_offset:
            return b"", -1
        return os.pread(self.fd, LOG_OVERHEAD + length, start), _next_offset(head, 0)

    def offset_for_timestamp(self, ts: int) -> int | None:
        """Offset of the first record (offset order) with timestamp >= ``ts``; None if none."""
        if self.max_timestamp < ts:
            return None
        limit = self.size
        for pos, _base, _nxt, size, mts, _e in self._walk_from_entry(
            self.index.floor_time(ts), limit
        ):
            if mts < ts:
                continue
            raw = os.pread(self.fd, size, pos)
            for off, rts in record_timestamps(raw, 0):
                if rts >= ts:
                    return off
        return None

    def last_epoch(self) -> int:
        """Leader epoch of the last batch; -1 when empty."""
        start = self.index.positions[-1] if len(self.index) else 0
        epoch = -1
        for _pos, _base, _nxt, _size, _ts, e in self.walk(start):
            epoch = e
        return epoch

    # ---- lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        """Persist the indexes and close the file; idempotent."""
        if self.fd < 0:
            return
        self.seal()
        os.close(self.fd)
        self.fd = -1

    def delete(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.log_path.unlink(missing_ok=True)
        self.index.delete_files()
