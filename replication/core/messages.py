"""Replica fetch messages, one partition each (ARCHITECTURE.md "Replication protocol").

Plain dataclasses: the HTTP driver encodes many of them into one long-poll
request per leader broker; the simulator passes them as they are. Record bytes
never enter the core: a response only says whether records are available from
``fetch_offset``, and the server ships the raw batch bytes beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Error codes a leader answers a replica fetch with (stable, upper case like the API).
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
"""The fetch names an older leader epoch than the leader's: refresh metadata."""
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
"""The fetch names a newer leader epoch: this broker has not yet learned it; retry."""
NOT_LEADER = "NOT_LEADER"
"""This broker does not lead the partition (any more)."""
NOT_REPLICA = "NOT_REPLICA"
"""The fetching broker is not in the partition's replica set."""
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
"""The fetch carries an older broker epoch than one already seen from that broker."""
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
"""``fetch_offset`` is below the log start or beyond the leader's LEO."""

FETCH_ERRORS = (
    FENCED_LEADER_EPOCH,
    UNKNOWN_LEADER_EPOCH,
    NOT_LEADER,
    NOT_REPLICA,
    STALE_BROKER_EPOCH,
    OFFSET_OUT_OF_RANGE,
)


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's fetch of one partition (KIP-320 fields).

    ``fetch_offset``: the follower's LEO. ``last_fetched_epoch``: the epoch of
    its last record, -1 when its log is empty. ``current_leader_epoch``: the
    leader epoch the follower believes is current (fencing). ``broker_epoch``:
    the follower's broker epoch, carried into AlterPartition when it is added
    to the ISR (seed 001 §6.5.1 case 3). ``replica_id``: the follower's broker id.
    """

    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    broker_epoch: int
    replica_id: int


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """``(epoch, end_offset)``: the largest epoch ≤ the follower's last fetched
    epoch in the leader's log, and where it ends there (KIP-101/KIP-320).
    ``(-1, -1)`` when the leader has no such epoch."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """The leader's answer for one partition.

    Exactly one of: ``error`` (a code above), ``diverging_epoch`` (truncate,
    then refetch), or a normal answer where ``records_available`` says whether
    the driver ships records starting at ``fetch_offset``. ``hw``,
    ``leader_epoch`` and ``log_start_offset`` are always the leader's values
    (-1 when the answer comes from a non-leader). ``fetch_offset`` echoes the
    request so a late or duplicated answer can be recognised.
    """

    fetch_offset: int
    hw: int
    leader_epoch: int
    log_start_offset: int
    error: str | None = None
    diverging_epoch: DivergingEpoch | None = None
    records_available: bool = False

    def __post_init__(self) -> None:
        assert self.error is None or self.error in FETCH_ERRORS, self.error
        assert not (self.error and self.diverging_epoch), "error and divergence are exclusive"
        assert not (self.records_available and (self.error or self.diverging_epoch))
