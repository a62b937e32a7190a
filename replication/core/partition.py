"""Partition replication state on the leader (sans-I/O).

Time is a parameter and there is no I/O: the server and the simulator drive
the same object. This is the single-node subset of the protocol; the
replication issue extends it with follower tracking, pending AlterPartition
states and ISR expansion/shrink rules.

Offsets follow Kafka's exclusive convention: records below the high
watermark (HW) are committed; the log end offset (LEO) is the next offset to
be written.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one replica: its LEO as of its last fetch."""

    broker: int
    log_end_offset: int = 0
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1


@dataclass(slots=True)
class LeaderState:
    """HW bookkeeping of a partition this broker leads.

    HW = min LEO over the Maximal ISR (ISR ∪ proposed ISR), advanced only
    while |ISR| >= min_insync_replicas (seed 001 §6.5.2 and §6.5.4), and
    never moved backwards.
    """

    local_broker: int
    leader_epoch: int
    isr: tuple[int, ...]
    min_insync_replicas: int
    high_watermark: int
    log_end_offset: int
    leader_epoch_start_offset: int
    proposed_isr: tuple[int, ...] | None = None
    replicas: dict[int, ReplicaProgress] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.local_broker in self.isr, "the leader is always in its ISR"
        assert self.high_watermark <= self.log_end_offset

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.proposed_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.proposed_isr)))

    def can_commit(self) -> bool:
        """acks=all precondition: enough replicas in the ISR (NOT_ENOUGH_REPLICAS otherwise)."""
        return len(self.isr) >= self.min_insync_replicas

    def on_local_append(self, log_end_offset: int) -> bool:
        """The leader appended; returns True if the HW moved."""
        assert log_end_offset >= self.log_end_offset
        self.log_end_offset = log_end_offset
        return self._advance_hw()

    def _replica_leo(self, broker: int) -> int:
        if broker == self.local_broker:
            return self.log_end_offset
        progress = self.replicas.get(broker)
        return progress.log_end_offset if progress else 0

    def _advance_hw(self) -> bool:
        if len(self.isr) < self.min_insync_replicas:
            return False
        candidate = min(self._replica_leo(b) for b in self.maximal_isr)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    @property
    def applied_high_watermark(self) -> int | None:
        """The HW, or None while it is below LESO ("HW unknown", seed 001 §6.4.2)."""
        if self.high_watermark < self.leader_epoch_start_offset:
            return None
        return self.high_watermark
