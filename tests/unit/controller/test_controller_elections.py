"""Elections: candidates, lag, wait-for-response, offline, unclean, suspects (seeds 000-002)."""

from __future__ import annotations

import pytest

from replication.controller import records as R
from replication.controller.election import rank_candidates, suspect_quorum
from replication.controller.errors import ControllerError
from replication.controller.image import ELECTION, NO_LEADER, OFFLINE, ONLINE


def fence(h, *brokers: int) -> None:
    """Let ``brokers`` miss heartbeats until fenced (everyone else keeps heartbeating)."""
    h.pass_time(h.settings.session_timeout_ms, silent=brokers)
    assert all(h.image.brokers[b].fenced for b in brokers)


# -- candidate choice --------------------------------------------------------


def test_election_prefers_the_smallest_reported_lag(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.heartbeat(2, leos={("t", 0): 90})
    h.heartbeat(3, leos={("t", 0): 100})
    fence(h, 1)
    assert h.part().leader == 3


def test_equal_lag_falls_back_to_assignment_order(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    order = h.part().replicas
    fence(h, order[0])
    assert h.part().leader == order[1]


def test_unknown_lag_ranks_after_every_known_one():
    cands = rank_candidates(
        [1, 2, 3],
        {1, 2, 3},
        live=lambda b: True,
        clean_broker=lambda b: True,
        leo=lambda b: {3: 5}.get(b, -1),
    )
    assert cands.clean == (3, 1, 2)


def test_suspect_reports_carry_lag_too(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.suspect(3, leo=50)
    h.suspect(2, leo=40)  # quorum (2 of 2 followers): election, 3 has the larger LEO
    assert h.part().leader == 3


def test_fenced_or_out_of_sync_replicas_are_never_clean_candidates(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.alter((1, 2))  # 3 is out of sync
    h.heartbeat(3, leos={("t", 0): 10_000})
    fence(h, 1)
    assert h.part().leader == 2


# -- wait-for-response -------------------------------------------------------


def test_elected_candidate_must_confirm_and_then_goes_online(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    fence(h, 1)
    p = h.part()
    assert p.status == ELECTION and p.leader_epoch == 1
    h.confirm()
    p = h.part()
    assert p.status == ONLINE and p.leader_epoch == 1 and p.partition_epoch == 2


def test_candidate_that_does_not_confirm_in_time_is_replaced_by_the_next(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    fence(h, 1)
    first = h.part().leader
    h.pass_time(h.settings.election_timeout_ms - 100)
    assert h.part().leader == first
    h.pass_time(100)
    p = h.part()
    assert p.leader not in (first, 1) and p.status == ELECTION and p.leader_epoch == 2
    assert first in p.isr, "a slow candidate stays in sync; it is only skipped"


def test_a_late_confirmation_from_a_replaced_candidate_is_fenced(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    fence(h, 1)
    first = h.part().leader
    h.pass_time(h.settings.election_timeout_ms)
    with pytest.raises(ControllerError) as exc:
        h.confirm(broker=first, leader_epoch=1)
    assert exc.value.code == "FENCED_LEADER_EPOCH"
    with pytest.raises(ControllerError) as exc:
        h.confirm(broker=first)
    assert exc.value.code == "NOT_LEADER"


def test_when_every_candidate_times_out_the_partition_goes_offline_and_is_retried(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    fence(h, 1)
    h.pass_time(2 * h.settings.election_timeout_ms)
    p = h.part()
    assert p.leader == NO_LEADER and p.status == OFFLINE and p.leader_epoch == 3
    h.pass_time(h.settings.offline_retry_ms)
    assert h.part().status == ELECTION and h.part().leader in (2, 3)


def test_repeated_confirmation_commits_nothing(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    fence(h, 1)
    h.confirm()
    assert h.confirm().records == []


def test_a_new_controller_restarts_the_timer_of_an_election_in_progress(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    fence(h, 1)
    candidate = h.part().leader
    h.m.activate(h.now_ms)
    h.pass_time(h.settings.election_timeout_ms - 100)
    assert h.part().leader == candidate
    h.pass_time(100)
    h.pass_time(100)
    assert h.part().leader != candidate


# -- offline and return ------------------------------------------------------


def test_no_candidate_leaves_the_partition_offline_without_a_leader(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.alter((1,))
    fence(h, 1)
    p = h.part()
    assert (p.leader, p.status, p.isr, p.leader_epoch) == (NO_LEADER, OFFLINE, (1,), 1)


def test_offline_partition_is_reelected_when_an_eligible_replica_unfences(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.alter((1,))
    fence(h, 1)
    d = h.heartbeat(1)
    assert isinstance(d.records[0], R.UnfenceBrokerRecord)
    p = h.part()
    assert p.leader == 1 and p.status == ELECTION and p.leader_epoch == 2
    assert not p.last_election_unclean


def test_returning_ineligible_replica_does_not_revive_an_offline_partition(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.alter((1,))
    fence(h, 1, 2)
    h.heartbeat(2)
    assert h.part().status == OFFLINE, "2 is out of sync and unclean election is off"


@pytest.mark.parametrize("allowed", [False, True])
def test_unclean_election_only_when_the_topic_allows_it_and_is_recorded(cluster, allowed):
    h = cluster(3)
    h.create("u", rf=3, unclean_leader_election=allowed)
    h.alter((1,), topic="u")
    fence(h, 1)
    u = h.part("u")
    if not allowed:
        assert u.status == OFFLINE and u.leader == NO_LEADER
        return
    assert u.leader in (2, 3) and u.last_election_unclean is True
    assert u.isr == (u.leader,), "only the new leader is known to hold the new log"
    assert u.status == ELECTION and u.leader_epoch == 1


def test_a_later_clean_election_clears_the_unclean_flag(cluster):
    h = cluster(3)
    h.create("u", rf=3, unclean_leader_election=True)
    h.alter((1,), topic="u")
    fence(h, 1)
    h.confirm("u")
    leader = h.part("u").leader
    other = ({2, 3} - {leader}).pop()
    h.alter((leader, other), topic="u")
    fence(h, leader)
    p = h.part("u")
    assert p.leader == other and p.last_election_unclean is False


def test_unclean_candidates_prefer_brokers_that_restarted_cleanly():
    cands = rank_candidates(
        [1, 2, 3],
        {1},
        live=lambda b: b != 1,
        clean_broker=lambda b: b != 2,
        leo=lambda b: {2: 100, 3: 10}[b],
    )
    assert cands.clean == () and cands.unclean == (3, 2)


# -- leader-suspect reports --------------------------------------------------


def test_suspect_quorum_is_a_majority_of_the_isr_followers():
    assert [suspect_quorum(n) for n in (1, 2, 3, 4, 5)] == [1, 1, 2, 2, 3]


def test_one_suspect_report_of_two_followers_is_not_enough(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    assert h.suspect(2).records == []
    assert h.part().leader == 1


def test_majority_of_the_isr_reporting_deposes_the_leader(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.suspect(2)
    h.now_ms += 100
    h.suspect(3)
    p = h.part()
    assert p.leader in (2, 3) and p.status == ELECTION and p.leader_epoch == 1
    assert 1 not in p.isr, "the deposed leader rejoins through the new leader"


def test_reports_outside_the_window_do_not_add_up(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.suspect(2)
    h.now_ms += h.settings.suspect_window_ms
    assert h.suspect(3).records == []
    assert h.part().leader == 1


def test_single_follower_isr_needs_one_report(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.alter((1, 2))
    h.suspect(2)
    assert h.part().leader == 2


def test_reports_from_out_of_sync_replicas_do_not_count(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.alter((1, 2))
    h.register(4)
    assert h.suspect(3).records == []
    assert h.part().leader == 1


def test_a_report_about_an_older_leader_epoch_is_fenced(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    fence(h, 1)
    with pytest.raises(ControllerError) as exc:
        h.suspect(2 if h.part().leader == 3 else 3, leader_epoch=0)
    assert exc.value.code == "FENCED_LEADER_EPOCH"


def test_the_leader_cannot_report_itself_and_strangers_cannot_report(cluster):
    h = cluster(4)
    h.create("t", rf=3)
    outsider = ({1, 2, 3, 4} - set(h.part().replicas)).pop()
    for reporter in (h.part().leader, outsider):
        with pytest.raises(ControllerError) as exc:
            h.suspect(reporter)
        assert exc.value.code == "INVALID_REQUEST"


def test_reports_from_a_stale_broker_epoch_are_refused(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    old = h.epochs[2]
    h.register(2)
    with pytest.raises(ControllerError) as exc:
        h.suspect(2, broker_epoch=old)
    assert exc.value.code == "STALE_BROKER_EPOCH"


def test_fencing_the_leader_acts_without_any_report(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    fence(h, 1)
    assert h.part().leader in (2, 3)


def test_slow_in_sync_candidates_are_never_skipped_for_an_unclean_one(cluster):
    h = cluster(4)
    h.create("u", rf=4, unclean_leader_election=True)
    h.alter((1, 2, 3), topic="u")  # 4 is out of sync
    fence(h, 1)
    h.pass_time(2 * h.settings.election_timeout_ms)  # 2 and 3 never confirm
    p = h.part("u")
    assert p.status == OFFLINE and p.leader == NO_LEADER
    assert not p.last_election_unclean and 4 not in p.isr


def test_elections_caused_by_a_reregistration_also_wait_for_a_response(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.register(1)  # restart before its session expired: fenced first, then re-registered
    candidate = h.part().leader
    assert candidate in (2, 3) and h.part().status == ELECTION
    h.pass_time(h.settings.election_timeout_ms)
    assert h.part().leader not in (candidate, 1)
