"""The simulated disk: the core's in-memory log plus what the checker tracks of it."""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.core.log import MemoryLog


class SimLog(MemoryLog):
    """A ``MemoryLog`` that remembers how long a prefix is known to equal the
    committed log (``matched``), so invariants cost O(new records), not O(log)."""

    def __init__(self) -> None:
        super().__init__()
        self.matched = 0

    def truncate_to(self, offset: int) -> None:
        super().truncate_to(offset)
        self.matched = min(self.matched, len(self.records))

    def match_committed(self, committed: list[int]) -> int:
        """Length of the longest common prefix with ``committed``."""
        m = self.matched
        recs = self.records
        limit = min(len(recs), len(committed))
        while m < limit and recs[m] == committed[m]:
            m += 1
        self.matched = m
        return m


@dataclass
class Disk:
    """What survives a broker restart: logs, HW checkpoints and the clean-shutdown marker.

    Flushing writes the logs and the HW checkpoints together; a power loss
    drops every record not flushed (seed 001 §6.2 lossy unclean shutdown).
    """

    logs: dict[tuple[str, int], SimLog] = field(default_factory=dict)
    hw_checkpoint: dict[tuple[str, int], int] = field(default_factory=dict)
    clean_marker: bool = True

    def log(self, key: tuple[str, int]) -> SimLog:
        if key not in self.logs:
            self.logs[key] = SimLog()
        return self.logs[key]

    def flush(self, hws: dict[tuple[str, int], int]) -> None:
        for log in self.logs.values():
            log.flush()
        for key, hw in hws.items():
            self.hw_checkpoint[key] = min(hw, self.log(key).log_end_offset)

    def power_loss(self) -> None:
        for log in self.logs.values():
            log.lose_unflushed()
