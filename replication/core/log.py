"""What the protocol core needs from a replica's log, and an in-memory log.

``ReplicaLog`` is the seam: ``app.storage.PartitionLog`` satisfies it through
a thin adapter in the driver; ``MemoryLog`` satisfies it for unit tests and
the simulator. The core only reads the log; the driver appends and truncates
(after the core returns a ``Truncate`` action).
"""

from __future__ import annotations

import bisect
from typing import Protocol


class ReplicaLog(Protocol):
    """Read-only view of a partition log for the protocol core."""

    @property
    def log_start_offset(self) -> int:
        """First offset still held (0 for a log never trimmed)."""
        ...

    @property
    def log_end_offset(self) -> int:
        """Next offset to be written (LEO); equals ``log_start_offset`` when empty."""
        ...

    @property
    def latest_epoch(self) -> int:
        """Leader epoch of the last record; -1 when the log is empty."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """KIP-101: ``(largest epoch <= epoch, its end offset)``; ``(-1, -1)`` when none.

        The end offset of an epoch is the start of the next epoch in the log,
        or the LEO for the latest one.
        """
        ...


class MemoryLog:
    """A log of opaque record ids, each stamped with the leader epoch that wrote it.

    Keeps an epoch cache ``(epoch, start_offset)`` like the storage layer.
    ``flushed`` is the offset below which records survive a power loss
    (seed 001 §6.2); ``lose_unflushed`` drops the rest.
    """

    def __init__(self) -> None:
        self.records: list[int] = []
        self._epochs: list[int] = []  # epochs, strictly increasing
        self._starts: list[int] = []  # start offset of each epoch
        self.flushed = 0

    # -- ReplicaLog -----------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def log_end_offset(self) -> int:
        return len(self.records)

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i < 0:
            return -1, -1
        end = self._starts[i + 1] if i + 1 < len(self._starts) else len(self.records)
        return self._epochs[i], end

    # -- mutation (driver side) ---------------------------------------------
    def append(self, epoch: int, record: int) -> int:
        """Append one record written in ``epoch``; returns its offset."""
        assert epoch >= self.latest_epoch, f"epoch {epoch} older than {self.latest_epoch}"
        if epoch > self.latest_epoch:
            self._epochs.append(epoch)
            self._starts.append(len(self.records))
        self.records.append(record)
        return len(self.records) - 1

    def epoch_at(self, offset: int) -> int:
        """Leader epoch of the record at ``offset`` (which must exist)."""
        assert 0 <= offset < len(self.records)
        return self._epochs[bisect.bisect_right(self._starts, offset) - 1]

    def truncate_to(self, offset: int) -> None:
        """Drop every record at ``offset`` and after; no-op at or beyond the LEO."""
        if offset >= len(self.records):
            return
        offset = max(offset, 0)
        del self.records[offset:]
        while self._starts and self._starts[-1] >= offset:
            self._starts.pop()
            self._epochs.pop()
        self.flushed = min(self.flushed, offset)

    def flush(self) -> None:
        self.flushed = len(self.records)

    def lose_unflushed(self) -> None:
        """Power loss: everything not flushed is gone."""
        self.truncate_to(self.flushed)
