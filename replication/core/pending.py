"""ISR changes in flight: the leader's half of AlterPartition (seed 001 §6.5.2).

While a change is pending the leader keeps its committed ISR and also the
proposed one; HW advances on their union, the Maximal ISR. On the
controller's answer the change is committed (or the ISR replaced by whatever
the controller committed) or rolled back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Controller answers after which the leader cannot know whether its change was
# applied (an earlier copy may have been): keep the Maximal ISR until metadata
# arrives, as Kafka does for INVALID_UPDATE_VERSION.
KEEP_PENDING_ERRORS = frozenset(
    {
        "INVALID_PARTITION_EPOCH",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "NOT_LEADER",
        "BROKER_FENCED",
        "STALE_BROKER_EPOCH",
        "BROKER_NOT_REGISTERED",
        "TOPIC_NOT_FOUND",
        "PARTITION_NOT_FOUND",
    }
)
"""Errors checked by the controller before the partition epoch, or the epoch check itself."""


@dataclass(frozen=True, slots=True)
class PendingExpand:
    """Adding ``added`` to the ISR, based on ``partition_epoch``."""

    proposed_isr: tuple[int, ...]
    partition_epoch: int
    added: int
    broker_epochs: Mapping[int, int] = field(default_factory=dict)
    sent_ms: int = 0


@dataclass(frozen=True, slots=True)
class PendingShrink:
    """Removing ``removed`` from the ISR, based on ``partition_epoch``."""

    proposed_isr: tuple[int, ...]
    partition_epoch: int
    removed: tuple[int, ...]
    broker_epochs: Mapping[int, int] = field(default_factory=dict)
    sent_ms: int = 0


PendingAlterPartition = PendingExpand | PendingShrink
