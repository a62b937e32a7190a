"""PartitionLog: one partition's directory of segments.

The interface the replication layer needs (Liftbridge's ``CommitLog`` shape):
append records as leader, append a leader's batch bytes unchanged as
follower, read by offset or timestamp, truncate to an offset, answer
"end offset of epoch E", enforce retention, flush, and recover on open.

Thread-safety: appends, roll, truncation, retention and close run on one
thread (the event loop). ``read``, ``offset_for_timestamp`` and ``flush``
may run in worker threads at the same time (large fetches and fsync must
not block the loop). Readers hold the shared side of ``_guard``; operations
that remove bytes or close files (truncate, retention, delete) hold its
exclusive side, so a reader never sees a file shortened or closed under it.
They also bump ``generation`` so a caller can tell two answers straddle a
truncation. Appends take no lock: bytes are published before offsets (see
segment.py), and a reader only looks below the log end offset it saw.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.storage.batch import BatchHeader, CorruptBatchError, encode_batch, verify_crc
from app.storage.epoch_cache import LeaderEpochCache
from app.storage.index import fsync_path
from app.storage.segment import MAX_RELATIVE_OFFSET, Segment

_SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
# Index positions are uint32; stay well inside that whatever the topic config says.
MAX_SEGMENT_BYTES = 2**31 - 1
EPOCH_FILE = "leader-epoch-checkpoint"


def _limit(value: int | None) -> int | None:
    """A retention limit, or None for unlimited (None or negative)."""
    return value if value is not None and value >= 0 else None


class OffsetOutOfRange(Exception):
    """Asked for an offset below the log start or past the log end."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} not in [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-partition storage settings.

    ``retention_ms`` / ``retention_bytes``: None (or negative, Kafka's -1)
    means unlimited. ``segment_bytes`` is clamped to [1, 2**31 - 1].
    ``index_interval_bytes`` 0 indexes every batch.
    """

    segment_bytes: int = 134_217_728
    segment_ms: int = 604_800_000
    retention_ms: int | None = None
    retention_bytes: int | None = None
    index_interval_bytes: int = 4096

    @property
    def roll_bytes(self) -> int:
        return min(max(self.segment_bytes, 1), MAX_SEGMENT_BYTES)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    segments_scanned: int
    bytes_truncated: int
    segments_deleted: int


class _ShrinkGuard:
    """Many readers or one shrinker; a waiting shrinker holds off new readers."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class PartitionLog:
    """Segments of one partition; ``log_end_offset`` is the next offset to write."""

    def __init__(
        self, directory: Path, config: LogConfig, *, recovery_point: int | None = None
    ) -> None:
        """Open (or create) the log and recover it.

        ``recovery_point`` is the offset below which data is known flushed
        (from the catalog checkpoint). Segments from the one containing it
        onward are CRC-verified and their indexes rebuilt; with None (clean
        shutdown) only the active segment is. Earlier segments load their
        index files, and are verified and rebuilt too if those are missing
        or inconsistent. A torn or corrupt batch truncates its segment there
        and drops every later segment (seed 001 §6.2: an unclean shutdown
        may lose an unflushed tail; replication refills it). Whatever was
        verified is fsynced, so ``recovery_point`` starts at the log end.
        """
        self.dir = directory
        self.config = config
        self.dir.mkdir(parents=True, exist_ok=True)
        self.segments: list[Segment] = []
        self.generation = 0
        self._guard = _ShrinkGuard()
        self._flush_lock = threading.Lock()
        self._dir_dirty = False
        self._closed = False
        self.epochs = LeaderEpochCache(self.dir / EPOCH_FILE)
        self.recovery = self._recover(recovery_point)
        self.recovery_point = self.log_end_offset

    # ---- recovery ------------------------------------------------------------------------
    def _recover(self, recovery_point: int | None) -> RecoveryReport:
        for tmp in self.dir.glob("*.tmp"):
            tmp.unlink(missing_ok=True)
        files = [(p, _SEGMENT_FILE.match(p.name)) for p in self.dir.iterdir()]
        bases = sorted(int(m[1]) for _p, m in files if m and m[2] == "log")
        for p, m in files:  # orphan index files: their log is gone
            if m and m[2] != "log" and int(m[1]) not in bases:
                p.unlink()
        scanned = truncated = deleted = 0
        verify_from = bases[-1] if bases else 0
        if recovery_point is not None:
            verify_from = max((b for b in bases if b <= recovery_point), default=0)
        broken = False
        for base in bases:
            if broken:
                Segment(self.dir, base, self.config.index_interval_bytes).delete()
                deleted += 1
                continue
            verify = base >= verify_from
            seg, cut = Segment.open(
                self.dir, base, self.config.index_interval_bytes, recover=verify
            )
            scanned += verify
            truncated += cut
            empty_sealed = not seg.size and base != bases[-1]
            if self.segments and (seg.base_offset != self.segments[-1].next_offset or empty_sealed):
                # A gap (the previous segment lost its tail) or an empty sealed
                # segment: nothing from here on continues the log.
                seg.delete()
                deleted += 1
                broken = True
                continue
            self.segments.append(seg)
            if cut:
                broken = True
        if not self.segments:
            self.segments.append(Segment.create(self.dir, 0, self.config.index_interval_bytes))
        for seg in self.segments[:-1]:
            seg.seal()  # indexes rebuilt above are saved for the next start
        self._reconcile_epochs()
        # Verified data may still sit only in the page cache (the process died,
        # not the machine): make it durable before calling it recovered.
        for seg in self.segments:
            if seg.base_offset >= verify_from or seg.dirty:
                os.fsync(seg.fd)
                seg.dirty = False
        if deleted or truncated:
            fsync_path(self.dir)
        return RecoveryReport(scanned, truncated, deleted)

    def _reconcile_epochs(self) -> None:
        """Make the epoch cache agree with the recovered log (it may be ahead or lost).

        Ahead (a crash lost the batches that introduced an epoch): trimmed.
        Lost, corrupt, behind the last batch's epoch or starting after the
        log start: rebuilt from every batch header (a walk of headers only; rare).
        """
        self.epochs.truncate_from_start(self.log_start_offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        if self.log_end_offset == self.log_start_offset:
            return
        last = next((s for s in reversed(self.segments) if s.size), None)
        last_epoch = last.last_epoch() if last is not None else -1
        entries_ok = (
            bool(self.epochs.entries)
            and self.epochs.entries[0][1] == self.log_start_offset
            and last_epoch <= self.epochs.latest_epoch
        )
        if entries_ok:
            return
        entries: list[tuple[int, int]] = []
        for seg in self.segments:
            for _pos, base, _nxt, _size, _ts, epoch in seg.walk():
                if epoch >= 0 and (not entries or epoch > entries[-1][0]):
                    entries.append((epoch, base))
        self.epochs.replace(entries)

    # ---- offsets -------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        """Offset of the first record kept (== log_end_offset when empty)."""
        return self.segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record will get."""
        return self.segments[-1].next_offset

    @property
    def latest_epoch(self) -> int:
        """Leader epoch of the last batch; -1 when the log is empty (``ReplicaLog``)."""
        return self.epochs.latest_epoch

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    # ---- writing -------------------------------------------------------------------------
    def append_records(
        self, records: Sequence[tuple[Any, ...]], leader_epoch: int, now_ms: int
    ) -> tuple[int, int]:
        """Append as leader: one batch, offsets assigned here. Returns ``(base, last)`` offset.

        ``records`` are ``(key_utf8 | None, body_json, timestamp_ms)``; at
        least one. ``now_ms`` is the wall clock, for rolling by age.
        ValueError if ``leader_epoch`` is older than the log's latest epoch
        (a fenced leader must not write).
        """
        self._check_epoch(leader_epoch)
        base = self.log_end_offset
        data = encode_batch(base, leader_epoch, records)
        h = BatchHeader.parse(data)
        self._append_planned(data, [h], now_ms)
        return base, h.last_offset

    def append_batches(self, data: bytes | memoryview, now_ms: int) -> int:
        """Append a leader's batch bytes unchanged (follower). Returns the new LEO.

        Every batch is CRC-checked and must continue the log exactly: a gap
        or overlap means the follower's fetch state is wrong and is refused
        with CorruptBatchError; a batch whose epoch goes backwards with
        ValueError. Either way nothing is written. Empty ``data`` is a no-op.
        """
        headers: list[BatchHeader] = []
        pos = 0
        expected = self.log_end_offset
        epoch = self.epochs.latest_epoch
        while pos < len(data):
            h = BatchHeader.parse(data, pos)
            verify_crc(data, pos, h)
            if h.base_offset != expected:
                raise CorruptBatchError(
                    f"batch at offset {h.base_offset} does not continue the log at {expected}"
                )
            if h.leader_epoch < epoch:
                raise ValueError(f"batch epoch {h.leader_epoch} is older than {epoch}")
            epoch = max(epoch, h.leader_epoch)
            headers.append(h)
            expected = h.next_offset
            pos += h.size
        if headers:
            self._append_planned(data, headers, now_ms)
        return self.log_end_offset

    def _check_epoch(self, leader_epoch: int) -> None:
        if leader_epoch < self.epochs.latest_epoch:
            raise ValueError(
                f"leader epoch {leader_epoch} is older than the log's {self.epochs.latest_epoch}"
            )

    def _roll_needed(self, seg_size: int, seg_base: int, rolling_base_ms: int | None,
                     h: BatchHeader, now_ms: int) -> bool:
        """Whether ``h`` must start a new segment after one of ``seg_size`` bytes."""
        if seg_size == 0:
            return False
        if seg_size + h.size > self.config.roll_bytes:
            return True
        if h.last_offset - seg_base > MAX_RELATIVE_OFFSET:
            return True
        return rolling_base_ms is not None and now_ms - rolling_base_ms >= self.config.segment_ms

    def _append_planned(
        self, data: bytes | memoryview, headers: list[BatchHeader], now_ms: int
    ) -> None:
        """Write validated batches, rolling before any batch that would not fit the segment."""
        seg = self.active
        size, seg_base, rolling = seg.size, seg.base_offset, seg.rolling_base_ms
        groups: list[tuple[bool, int, int, list[BatchHeader]]] = []  # (roll first, start, end, hs)
        cur: list[BatchHeader] = []
        cur_start = pos = 0
        roll_first = False
        for h in headers:
            if self._roll_needed(size, seg_base, rolling, h, now_ms):
                if cur:
                    groups.append((roll_first, cur_start, pos, cur))
                cur, cur_start, roll_first = [], pos, True
                size, seg_base, rolling = 0, h.base_offset, None
            cur.append(h)
            size += h.size
            pos += h.size
            if rolling is None:
                rolling = now_ms
        groups.append((roll_first, cur_start, pos, cur))
        mv = memoryview(data)
        for roll_first, start, end, hs in groups:
            if roll_first:
                self.roll()
            for h in hs:
                if h.leader_epoch > self.epochs.latest_epoch:
                    self.epochs.assign(h.leader_epoch, h.base_offset)
            self.active.append(data if len(groups) == 1 else mv[start:end], hs, now_ms)

    def roll(self) -> None:
        """Seal the active segment and start a new one at the log end offset (no-op if empty)."""
        if self.active.size == 0:
            return
        self.active.seal()
        self.segments.append(
            Segment.create(self.dir, self.log_end_offset, self.config.index_interval_bytes)
        )
        self._dir_dirty = True

    # ---- reading -------------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, upto_offset: int | None = None) -> bytes:
        """Whole batches starting with the one that holds ``offset``.

        Returns at most ``max_bytes``, except that the first batch is always
        returned whole when any record in ``[offset, upto_offset)`` exists.
        Never returns a batch that starts at or past ``upto_offset``
        (default and upper bound: the log end). The first batch may begin
        before ``offset``; callers skip those records. b"" when
        ``offset >= upto_offset``. Raises OffsetOutOfRange outside
        ``[log_start_offset, log_end_offset]``. Safe in a worker thread.
        """
        with self._guard.shared():
            segments = list(self.segments)
            start, end = segments[0].base_offset, segments[-1].next_offset
            if offset < start or offset > end:
                raise OffsetOutOfRange(offset, start, end)
            upto = end if upto_offset is None else min(upto_offset, end)
            if offset >= upto:
                return b""
            parts: list[bytes] = []
            budget = max_bytes
            for seg in self._segments_from(segments, offset):
                if seg.base_offset >= upto or (parts and budget <= 0):
                    break
                chunk, nxt = seg.read_with_next(
                    max(offset, seg.base_offset), budget, upto, min_one=not parts
                )
                if not chunk:
                    break
                parts.append(chunk)
                budget -= len(chunk)
                if nxt >= upto or nxt < seg.next_offset:
                    break  # done, or cut short inside this segment by max_bytes
            return parts[0] if len(parts) == 1 else b"".join(parts)

    @staticmethod
    def _segments_from(segments: list[Segment], offset: int) -> list[Segment]:
        lo, hi = 0, len(segments) - 1
        while lo < hi:  # last segment with base_offset <= offset
            mid = (lo + hi + 1) // 2
            if segments[mid].base_offset <= offset:
                lo = mid
            else:
                hi = mid - 1
        return segments[lo:]

    def offset_for_timestamp(self, ts: int) -> int | None:
        """Offset of the first record (in offset order) with timestamp >= ``ts``; None if none.

        Records need not be in timestamp order, within or across batches.
        Safe in a worker thread.
        """
        with self._guard.shared():
            for seg in list(self.segments):
                hit = seg.offset_for_timestamp(ts)
                if hit is not None:
                    return hit
        return None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """KIP-101 answer: ``(largest epoch <= epoch, end offset)``; ``(-1, -1)`` if unknown.

        See LeaderEpochCache.end_offset_for for the edge cases.
        """
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # ---- shrinking -----------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop every record at or after ``offset``, in whole batches.

        If ``offset`` falls inside a batch that whole batch goes too, so
        the log end may end up below ``offset`` (followers append whole
        leader batches; they refetch from the new log end). No-op when
        ``offset >= log_end_offset``. At or below the log start the log is
        emptied and restarts at ``max(offset, 0)``.
        """
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(max(offset, 0))
            return
        with self._guard.exclusive():
            self.generation += 1
            while self.segments[-1].base_offset >= offset:
                self.segments.pop().delete()
                self._dir_dirty = True
            self.active.truncate_to(offset)
            self.epochs.truncate_from_end(self.log_end_offset)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and continue at ``offset`` (follower far behind the log start).

        Segments are deleted newest first, so a crash midway leaves a
        shorter but valid log.
        """
        if offset < 0:
            raise ValueError(f"negative start offset {offset}")
        with self._guard.exclusive():
            self.generation += 1
            for seg in reversed(self.segments):
                seg.delete()
            self.segments = [Segment.create(self.dir, offset, self.config.index_interval_bytes)]
            self.epochs.clear()
            self.recovery_point = offset
            self._dir_dirty = True

    def enforce_retention(self, now_ms: int, max_offset: int) -> int:
        """Delete whole sealed segments past ``retention_ms`` / ``retention_bytes``.

        Only segments entirely below ``max_offset`` (the high watermark) are
        eligible, so retention never removes uncommitted data; the active
        segment never goes. Time retention compares ``now_ms`` with a
        segment's largest record timestamp. Returns the number of segments
        deleted; the log start offset advances to the first one kept.
        """
        cfg = self.config
        ret_ms = _limit(cfg.retention_ms)
        ret_bytes = _limit(cfg.retention_bytes)
        if ret_ms is None and ret_bytes is None:
            return 0
        victims = 0
        total = self.size_bytes
        for seg in self.segments[:-1]:
            if seg.next_offset > max_offset:
                break
            too_old = ret_ms is not None and now_ms - seg.max_timestamp > ret_ms
            too_big = ret_bytes is not None and total - seg.size >= ret_bytes
            if not (too_old or too_big):
                break
            victims += 1
            total -= seg.size
        if victims:
            with self._guard.exclusive():
                self.generation += 1
                for seg in self.segments[:victims]:
                    seg.delete()
                del self.segments[:victims]
                self.epochs.truncate_from_start(self.log_start_offset)
                self.epochs.truncate_from_end(self.log_end_offset)  # empty log: no epochs
                self.recovery_point = max(self.recovery_point, self.log_start_offset)
                self._dir_dirty = True
        return victims

    # ---- durability ----------------------------------------------------------------------
    def flush(self) -> int:
        """fsync unflushed segments, sealed indexes and the directory; returns the recovery point.

        Safe in a worker thread while the loop appends: it fsyncs duplicates
        of the descriptors taken under the shared lock, so a concurrent
        retention or truncation never has a file closed under it. If one of
        those ran meanwhile the recovery point is left alone (conservative).
        Concurrent flushes run one at a time: a second flush must not return
        while the first is still fsyncing data the second was asked to cover.
        """
        with self._flush_lock:
            return self._flush()

    def _flush(self) -> int:
        with self._guard.shared():
            gen = self.generation
            leo = self.log_end_offset
            fds: list[int] = []
            index_segments: list[Segment] = []
            for seg in list(self.segments):
                if seg.dirty and seg.fd >= 0:
                    seg.dirty = False  # before fsync: a racing append sets it again
                    fds.append(os.dup(seg.fd))
                if seg.index_unsynced:
                    seg.index_unsynced = False
                    index_segments.append(seg)
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        try:
            for fd in fds:
                os.fsync(fd)
        finally:
            for fd in fds:
                os.close(fd)
        for seg in index_segments:
            seg.index.fsync_files()
        if dir_dirty:
            fsync_path(self.dir)
        if gen == self.generation:
            self.recovery_point = max(self.recovery_point, leo)
        return self.recovery_point

    def close(self) -> None:
        """Save indexes and close every file; idempotent. The log is unusable afterwards.

        Does not fsync: call ``flush`` first if the fsync policy asks for it.
        """
        with self._guard.exclusive():  # not under a reader in a worker thread
            if self._closed:
                return
            self._closed = True
            for seg in self.segments:
                seg.close()

    def delete(self) -> None:
        """Remove the partition's files and directory (topic deletion)."""
        with self._guard.exclusive():
            self.generation += 1
            for seg in self.segments:
                seg.delete()
            self.segments = []
            self._closed = True
        self.epochs.path.unlink(missing_ok=True)
        for p in self.dir.iterdir():
            p.unlink()
        self.dir.rmdir()
