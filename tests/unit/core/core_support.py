"""Builders for protocol-core unit tests: logs with epochs, leaders, followers, fetches."""

from __future__ import annotations

from replication.core import messages as M
from replication.core.follower import FollowerState
from replication.core.leader import LeaderState
from replication.core.log import MemoryLog
from replication.core.rules import ALL_ON, ReplicationSettings, SafetyRules

SETTINGS = ReplicationSettings(
    replica_lag_time_ms=1_000,
    replica_lag_max_records=0,
    leader_timeout_ms=500,
    alter_partition_retry_ms=200,
)


def log_of(*epochs: int) -> MemoryLog:
    """A log with one record per given epoch: ``log_of(0, 0, 1)`` has offsets 0-2.

    Record ids are ``100 * epoch + offset`` so two logs agree exactly where
    they were written in the same epoch at the same offset.
    """
    log = MemoryLog()
    for offset, epoch in enumerate(epochs):
        log.append(epoch, 100 * epoch + offset)
    return log


def leader(
    log: MemoryLog,
    *,
    isr: tuple[int, ...] = (1, 2, 3),
    assignment: tuple[int, ...] = (1, 2, 3),
    epoch: int = 0,
    partition_epoch: int = 0,
    min_isr: int = 2,
    hw: int = 0,
    now_ms: int = 0,
    settings: ReplicationSettings = SETTINGS,
    rules: SafetyRules = ALL_ON,
) -> LeaderState:
    """Broker 1 becomes leader of ``log``."""
    return LeaderState.become_leader(
        local_broker=1,
        leader_epoch=epoch,
        partition_epoch=partition_epoch,
        isr=isr,
        assignment=assignment,
        min_insync_replicas=min_isr,
        log=log,
        high_watermark=hw,
        now_ms=now_ms,
        settings=settings,
        rules=rules,
    )


def follower(
    log: MemoryLog,
    *,
    me: int = 2,
    leader_id: int = 1,
    epoch: int = 0,
    hw: int = 0,
    now_ms: int = 0,
    broker_epoch: int = 7,
    rules: SafetyRules = ALL_ON,
) -> FollowerState:
    state, actions = FollowerState.become_follower(
        local_broker=me,
        leader=leader_id,
        leader_epoch=epoch,
        partition_epoch=0,
        broker_epoch=broker_epoch,
        log=log,
        high_watermark=hw,
        now_ms=now_ms,
        settings=SETTINGS,
        rules=rules,
    )
    assert actions == [] or not rules.truncate_by_leader_epoch
    return state


def fetch(
    replica: int,
    offset: int,
    *,
    last_epoch: int = 0,
    epoch: int = 0,
    broker_epoch: int = 7,
) -> M.FetchRequest:
    return M.FetchRequest(
        fetch_offset=offset,
        last_fetched_epoch=last_epoch if offset > 0 else -1,
        current_leader_epoch=epoch,
        broker_epoch=broker_epoch,
        replica_id=replica,
    )


def append(log: MemoryLog, state: LeaderState, n: int = 1) -> None:
    """The leader appends ``n`` records in its epoch."""
    for _ in range(n):
        log.append(state.leader_epoch, 100 * state.leader_epoch + log.log_end_offset)
    state.on_local_append(log.log_end_offset)


def replicate(leader_log: MemoryLog, follower_log: MemoryLog, upto: int | None = None) -> None:
    """Copy the leader's records (with their epochs) the follower lacks, up to ``upto``."""
    end = leader_log.log_end_offset if upto is None else upto
    for o in range(follower_log.log_end_offset, end):
        follower_log.append(leader_log.epoch_at(o), leader_log.records[o])
