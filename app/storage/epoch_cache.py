"""Leader-epoch cache: which epoch's leader wrote which offsets (KIP-101).

Entries ``(epoch, start_offset)`` in increasing order of both. A follower
asks "where does my last epoch end on the leader?" and truncates there,
instead of trusting its HW (seed 001 §6.6, Log Matching; ARCHITECTURE.md).
Persisted as a small text file, replaced atomically (write, fsync, rename,
fsync the directory) whenever it changes. The cache is always written
before the batch that introduces an epoch, so on disk it is never behind
the log; the log trims it back on start if it is ahead.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from pathlib import Path

from app.storage.index import fsync_path

_VERSION = 0


class LeaderEpochCache:
    """``entries`` is a list of ``(epoch, start_offset)``, both strictly increasing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[tuple[int, int]] = []
        self.loaded_ok = self._load()

    def _load(self) -> bool:
        """Read the file; False (and no entries) if it is missing or corrupt."""
        try:
            lines = self.path.read_text().split()
        except (FileNotFoundError, UnicodeDecodeError):
            return False
        try:
            version, count = int(lines[0]), int(lines[1])
            nums = [int(x) for x in lines[2:]]
        except (ValueError, IndexError):
            return False  # a corrupt cache is rebuilt from the batches by the log
        if version != _VERSION or len(nums) != 2 * count:
            return False
        entries = [(nums[i], nums[i + 1]) for i in range(0, len(nums), 2)]
        if not _monotonic(entries):
            return False
        self.entries = entries
        return True

    def _persist(self) -> None:
        body = f"{_VERSION}\n{len(self.entries)}\n" + "".join(
            f"{e} {o}\n" for e, o in self.entries
        )
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fsync_path(self.path.parent)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, -1 when empty."""
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``; no-op unless ``epoch`` is newer.

        Negative epochs (-1: "no epoch") are never recorded.

        A newer epoch must not start before the latest one (that would mean
        the log was truncated without telling the cache): ValueError.
        """
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        if self.entries and start_offset < self.entries[-1][1]:
            raise ValueError(
                f"epoch {epoch} would start at {start_offset}, before epoch "
                f"{self.entries[-1][0]} at {self.entries[-1][1]}"
            )
        self.entries.append((epoch, start_offset))
        self._persist()

    def replace(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace every entry (rebuilding from the log's batch headers)."""
        new = list(entries)
        if not _monotonic(new):
            raise ValueError(f"epoch entries not increasing: {new}")
        self.entries = new
        self._persist()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(largest epoch <= epoch, its end offset)`` as in KIP-101's OffsetsForLeaderEpoch.

        The end offset of an epoch is the start offset of the next epoch, or
        ``log_end_offset`` for the latest (also when ``epoch`` is newer than
        every entry: a new leader records its epoch only with its first
        batch). ``(-1, -1)`` when the cache is empty, ``epoch < 0`` or
        ``epoch`` is older than every entry (the data is gone; the caller
        falls back to its high watermark).
        """
        found = -1
        for i, (e, _start) in enumerate(self.entries):
            if e > epoch:
                break
            found = i
        if found < 0:
            return -1, -1
        if found == len(self.entries) - 1:
            return self.entries[found][0], log_end_offset
        return self.entries[found][0], self.entries[found + 1][1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after ``end_offset`` (after a log truncation)."""
        keep = [(e, o) for e, o in self.entries if o < end_offset]
        if keep != self.entries:
            self.entries = keep
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Clamp to a new log start offset (after retention or a full truncation).

        Epochs that ended at or before ``start_offset`` go; the one that
        covers it now starts there.
        """
        keep: list[tuple[int, int]] = []
        for i, (e, o) in enumerate(self.entries):
            nxt = self.entries[i + 1][1] if i + 1 < len(self.entries) else None
            if nxt is not None and nxt <= start_offset:
                continue
            keep.append((e, max(o, start_offset)))
        if keep != self.entries:
            self.entries = keep
            self._persist()

    def clear(self) -> None:
        self.entries = []
        self._persist()


def _monotonic(entries: list[tuple[int, int]]) -> bool:
    return all(
        e1 < e2 and o1 < o2 for (e1, o1), (e2, o2) in itertools.pairwise(entries)
    ) and all(e >= 0 and o >= 0 for e, o in entries)
