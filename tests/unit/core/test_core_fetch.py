"""The leader's answer to a replica fetch: fencing, divergence (KIP-101/KIP-320), progress."""

from __future__ import annotations

from core_support import fetch, leader, log_of

from replication.core import messages as M
from replication.core.log import MemoryLog


def test_fetch_with_a_stale_leader_epoch_is_fenced() -> None:
    log = log_of(0)
    s = leader(log, epoch=3)
    resp, actions = s.handle_fetch(fetch(2, 1, epoch=2), log, 1)
    assert resp.error == M.FENCED_LEADER_EPOCH and actions == []
    assert s.replicas[2].last_fetch_ms == -1  # a fenced fetch teaches nothing


def test_fetch_with_a_future_leader_epoch_gets_unknown_leader_epoch() -> None:
    log = log_of(0)
    s = leader(log, epoch=3)
    resp, _ = s.handle_fetch(fetch(2, 1, epoch=4), log, 1)
    assert resp.error == M.UNKNOWN_LEADER_EPOCH


def test_fetch_from_a_broker_outside_the_replica_set_is_refused() -> None:
    log = log_of(0)
    s = leader(log)
    resp, _ = s.handle_fetch(fetch(9, 0), log, 1)
    assert resp.error == M.NOT_REPLICA


def test_fetch_from_an_older_broker_epoch_than_seen_is_refused() -> None:
    log = log_of(0)
    s = leader(log)
    s.handle_fetch(fetch(2, 0, broker_epoch=8), log, 1)
    resp, _ = s.handle_fetch(fetch(2, 1, broker_epoch=7), log, 2)
    assert resp.error == M.STALE_BROKER_EPOCH


def test_fetch_from_a_new_broker_incarnation_forgets_the_old_progress() -> None:
    log = log_of(0, 0, 0)
    s = leader(log)
    s.handle_fetch(fetch(2, 3, broker_epoch=7), log, 1)
    assert s.replicas[2].log_end_offset == 3
    s.handle_fetch(fetch(2, 1, broker_epoch=9), log, 2)
    assert s.replicas[2].log_end_offset == 1 and s.replicas[2].broker_epoch == 9


def test_matching_fetch_records_progress_and_says_records_are_available() -> None:
    log = log_of(0, 0, 1)
    s = leader(log, epoch=1)
    resp, _ = s.handle_fetch(fetch(2, 2, last_epoch=0, epoch=1), log, 42)
    assert resp == M.FetchResponse(
        fetch_offset=2, hw=0, leader_epoch=1, log_start_offset=0, records_available=True
    )
    p = s.replicas[2]
    assert (p.log_end_offset, p.last_fetch_ms, p.fetch_leader_epoch) == (2, 42, 1)
    resp, _ = s.handle_fetch(fetch(2, 3, last_epoch=1, epoch=1), log, 43)
    assert not resp.records_available and p.last_caught_up_ms == 43


def test_follower_with_records_of_an_epoch_the_leader_ended_earlier_gets_diverging_epoch() -> None:
    """Leader: epoch 0 at 0-1, epoch 2 from 2. Follower: epoch 0 at 0-3 (never committed)."""
    log = log_of(0, 0, 2, 2)
    s = leader(log, epoch=2)
    resp, actions = s.handle_fetch(fetch(2, 4, last_epoch=0, epoch=2), log, 1)
    assert resp.diverging_epoch == M.DivergingEpoch(0, 2)
    assert actions == [] and s.replicas[2].log_end_offset == 0


def test_follower_with_an_epoch_the_leader_never_had_gets_the_largest_epoch_below() -> None:
    """Follower's last epoch 1 (a leader that never replicated); leader has 0 then 2."""
    log = log_of(0, 0, 2)
    s = leader(log, epoch=2)
    resp, _ = s.handle_fetch(fetch(2, 3, last_epoch=1, epoch=2), log, 1)
    assert resp.diverging_epoch == M.DivergingEpoch(0, 2)


def test_follower_ahead_of_the_leader_in_the_same_epoch_gets_diverging_epoch() -> None:
    log = log_of(0, 0)
    s = leader(log, epoch=1)
    resp, _ = s.handle_fetch(fetch(2, 5, last_epoch=0, epoch=1), log, 1)
    assert resp.diverging_epoch == M.DivergingEpoch(0, 2)


def test_follower_with_records_but_a_leader_with_an_empty_log_truncates_to_the_start() -> None:
    log = MemoryLog()
    s = leader(log, epoch=1)
    resp, _ = s.handle_fetch(fetch(2, 2, last_epoch=0, epoch=1), log, 1)
    assert resp.diverging_epoch == M.DivergingEpoch(-1, 0)


def test_empty_follower_fetching_from_zero_never_diverges() -> None:
    log = log_of(0, 0)
    s = leader(log, epoch=1)
    resp, _ = s.handle_fetch(fetch(2, 0, epoch=1), log, 1)
    assert resp.diverging_epoch is None and resp.records_available
