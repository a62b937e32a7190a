"""Actions the protocol core asks its driver to carry out (sans-I/O outputs).

The core never sends or writes; it returns these and the driver (the asyncio
server or the simulator) performs them in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class SendAlterPartition:
    """Ask the controller to change the ISR (seed 001 §6.3 rule 4, §6.5.2).

    ``partition_epoch`` is the epoch the change is based on; ``broker_epochs``
    names the broker epoch seen in the fetches of every replica being added
    (§6.5.1 case 3). The driver answers with ``LeaderState.on_alter_partition_result``.
    """

    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Truncate:
    """Truncate the local log so that its LEO becomes ``offset`` (drop ``offset`` onwards)."""

    offset: int


@dataclass(frozen=True, slots=True)
class AppendFetched:
    """Append the record batches shipped with the accepted fetch response; they
    start at ``offset`` (the follower's LEO). Then call ``FollowerState.on_log_changed``."""

    offset: int


@dataclass(frozen=True, slots=True)
class ReportLeaderSuspect:
    """Tell the controller this follower has not fetched successfully for
    ``leader_timeout_ms`` (seed 000 "Partition Leader Failure")."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class HighWatermarkAdvanced:
    """The leader's HW moved to ``high_watermark``: wake acks=all waiters and long-polls."""

    high_watermark: int


Action = (
    SendAlterPartition | Truncate | AppendFetched | ReportLeaderSuspect | HighWatermarkAdvanced
)
