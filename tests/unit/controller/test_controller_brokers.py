"""Broker registration, epochs, heartbeats, fencing and unclean restarts (seed 001 §6.5.1)."""

from __future__ import annotations

import pytest

from replication.controller import records as R
from replication.controller.errors import ControllerError
from replication.controller.image import ELECTION, NO_LEADER, OFFLINE
from replication.controller.sessions import BrokerSessions


def codes(exc: pytest.ExceptionInfo[ControllerError]) -> str:
    return exc.value.code


def test_each_registration_gets_a_new_cluster_wide_monotonic_epoch(cluster):
    h = cluster(3)
    assert [h.epochs[b] for b in (1, 2, 3)] == [1, 2, 3]
    again = h.register(2)
    assert again == 4
    assert h.image.brokers[2].broker_epoch == 4
    assert h.image.last_broker_epoch == 4


def test_reregistration_fences_the_previous_unfenced_epoch_first(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    leader = h.part().leader
    old_epoch = h.epochs[leader]
    d = h.m.register_broker(leader, "http://new", None, True, h.now_ms)
    assert isinstance(d.records[0], R.FenceBrokerRecord)
    assert d.records[0] == R.FenceBrokerRecord(leader, old_epoch)
    assert isinstance(d.records[1], R.RegisterBrokerRecord)
    h.commit(d)
    p = h.part()
    assert p.leader != leader, "the partitions it led were re-elected"
    assert leader not in p.isr, "the old epoch's ISR membership ended with it"
    assert not h.image.brokers[leader].fenced


def test_reregistration_after_a_fence_needs_no_second_fence(cluster):
    h = cluster(3)
    h.pass_time(1_000, silent=(3,))
    assert h.image.brokers[3].fenced
    d = h.m.register_broker(3, "http://b3", None, True, h.now_ms)
    assert [type(r) for r in d.records] == [R.RegisterBrokerRecord]


def test_heartbeat_is_soft_state_and_commits_nothing(cluster):
    h = cluster(3)
    version = h.image.version
    assert h.heartbeat(1).records == []
    assert h.image.version == version
    assert h.m.sessions.last_heartbeat_ms(1) == h.now_ms


def test_heartbeat_with_a_superseded_epoch_is_rejected(cluster):
    h = cluster(3)
    old = h.epochs[2]
    h.register(2)
    with pytest.raises(ControllerError) as exc:
        h.heartbeat(2, epoch=old)
    assert codes(exc) == "STALE_BROKER_EPOCH"


def test_heartbeat_from_an_unknown_broker_or_ungranted_epoch_is_refused(cluster):
    h = cluster(2)
    with pytest.raises(ControllerError) as exc:
        h.m.heartbeat(9, 1, h.now_ms)
    assert codes(exc) == "BROKER_NOT_REGISTERED"
    with pytest.raises(ControllerError) as exc:
        h.m.heartbeat(1, 99, h.now_ms)
    assert codes(exc) == "BROKER_NOT_REGISTERED"


def test_sessions_tracker_rejects_stale_epochs_and_expires_after_the_timeout():
    s = BrokerSessions(session_timeout_ms=100)
    s.track(1, 5, now_ms=0)
    with pytest.raises(ControllerError) as exc:
        s.heartbeat(1, 4, now_ms=10)
    assert codes(exc) == "STALE_BROKER_EPOCH"
    s.heartbeat(1, 5, now_ms=50)
    assert s.expired(149) == []
    assert s.expired(150) == [(1, 5)]
    s.heartbeat(1, 6, now_ms=10)  # a newer epoch replaces the session
    assert s.broker_epoch(1) == 6 and s.last_heartbeat_ms(1) == 10
    assert s.last_heartbeat_ms(2) == -1 and s.broker_epoch(2) == -1


def test_broker_is_fenced_once_its_session_times_out(cluster):
    h = cluster(3)
    h.pass_time(900, silent=(3,))
    assert not h.image.brokers[3].fenced
    h.pass_time(100, silent=(3,))
    assert h.image.brokers[3].fenced
    assert not h.image.brokers[1].fenced and not h.image.brokers[2].fenced


def test_fenced_broker_leaves_every_isr(cluster):
    h = cluster(3)
    h.create("t", partitions=6, rf=3)
    h.pass_time(1_000, silent=(2,))
    for p in h.image.topics["t"].partitions:
        assert 2 not in p.isr
        assert p.leader != 2
        assert 2 in p.replicas, "fencing changes the ISR, never the assignment"


def test_fenced_leaders_partitions_are_reelected_among_the_rest(cluster):
    h = cluster(3)
    h.create("t", partitions=3, rf=3)
    led = [p.partition for p in h.image.topics["t"].partitions if p.leader == 1]
    epochs = {p.partition: p.leader_epoch for p in h.image.topics["t"].partitions}
    h.pass_time(1_000, silent=(1,))
    for i in led:
        p = h.part("t", i)
        assert p.leader in (2, 3)
        assert p.status == ELECTION
        assert p.leader_epoch == epochs[i] + 1


def test_many_fences_in_one_tick_make_one_change_per_partition(cluster):
    h = cluster(4)
    h.create("t", partitions=8, rf=3)
    h.now_ms += 1_000
    for b in (1, 2):
        h.heartbeat(b)
    d = h.m.tick(h.now_ms)
    fences = [r for r in d.records if isinstance(r, R.FenceBrokerRecord)]
    changes = [r for r in d.records if isinstance(r, R.PartitionChangeRecord)]
    assert sorted(r.broker_id for r in fences) == [3, 4]
    keys = [(r.topic, r.partition) for r in changes]
    assert len(keys) == len(set(keys)), "one record per partition per decision"
    before = {p.partition: p.partition_epoch for p in h.image.topics["t"].partitions}
    h.commit(d)
    for p in h.image.topics["t"].partitions:
        assert p.partition_epoch == before[p.partition] + 1
        assert not {3, 4} & set(p.isr)


def test_heartbeat_at_the_current_epoch_unfences_and_keeps_the_epoch(cluster):
    h = cluster(3)
    h.pass_time(1_000, silent=(3,))
    assert h.image.brokers[3].fenced
    d = h.heartbeat(3)
    assert [type(r) for r in d.records] == [R.UnfenceBrokerRecord]
    assert not h.image.brokers[3].fenced
    assert h.image.brokers[3].broker_epoch == h.epochs[3]


def test_unfenced_broker_does_not_rejoin_isrs_by_itself(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.pass_time(1_000, silent=(3,))
    h.heartbeat(3)
    assert 3 not in h.part().isr, "only the leader's AlterPartition re-adds it"


def test_last_isr_member_fenced_stays_in_the_isr_and_the_partition_goes_offline(cluster):
    h = cluster(1)
    h.create("t", rf=1)
    h.pass_time(1_000, silent=(1,))
    p = h.part()
    assert p.isr == (1,)
    assert p.leader == NO_LEADER and p.status == OFFLINE
    assert p.leader_epoch == 1, "losing the leader is a leader change"


def test_clean_restart_of_the_last_isr_member_brings_the_partition_back(cluster):
    h = cluster(1)
    h.create("t", rf=1)
    h.pass_time(1_000, silent=(1,))
    h.register(1, clean=True)
    p = h.part()
    assert p.leader == 1 and p.status == ELECTION and p.leader_epoch == 2
    h.confirm()
    assert h.part().status == "online"


def test_unclean_restart_of_the_only_replica_recovers_the_partition_from_its_log(cluster):
    """Seed 001 §6.8: with every last-known ISR member back, lead from the longest log
    rather than stay offline for good (a standalone node after kill -9)."""
    h = cluster(1)
    h.create("t", rf=1)
    h.pass_time(1_000, silent=(1,))
    assert h.part().status == OFFLINE
    h.register(1, clean=False)
    assert h.image.brokers[1].clean is False
    p = h.part()
    assert p.leader == 1 and p.isr == (1,) and p.status == ELECTION
    assert p.last_election_unclean is False


def test_unclean_recovery_waits_for_every_last_isr_member_and_picks_the_longest_log(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.pass_time(2_000, silent=(1, 2, 3))  # all fenced; the ISR is kept as last known
    assert h.part().status == OFFLINE and set(h.part().isr) == {1, 2, 3}
    h.register(1, clean=False, leos={("t", 0): 40})
    h.register(2, clean=False, leos={("t", 0): 55})
    assert h.part().status == OFFLINE, "3 may hold more: wait for it"
    h.register(3, clean=False, leos={("t", 0): 50})
    p = h.part()
    assert p.leader == 2 and p.isr == (2,) and p.status == ELECTION


def test_an_unclean_member_is_not_a_clean_candidate_while_a_clean_one_returns(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.pass_time(2_000, silent=(1, 2, 3))
    h.register(1, clean=False, leos={("t", 0): 99})
    h.register(3, clean=True, leos={("t", 0): 10})
    p = h.part()
    assert p.leader == 3, "a clean last-ISR member leads, not the unclean one"


def test_unclean_restart_without_a_fence_first_fences_then_strips_isr(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.register(2, clean=False)
    p = h.part()
    assert 2 not in p.isr and p.leader != 2
    assert h.image.brokers[2].clean is False


def test_a_new_active_controller_gives_every_broker_a_full_session(cluster):
    h = cluster(3)
    h.now_ms = 50_000  # long silence while the controller failed over
    h.m.activate(h.now_ms)
    assert h.tick(999).records == []
    d = h.tick(1)
    assert sorted(r.broker_id for r in d.records if isinstance(r, R.FenceBrokerRecord)) == [
        1,
        2,
        3,
    ]


def test_registration_validates_its_input(cluster):
    h = cluster(0)
    with pytest.raises(ControllerError) as exc:
        h.m.register_broker(-1, "http://x", None, True)
    assert codes(exc) == "INVALID_REQUEST"
    with pytest.raises(ControllerError):
        h.m.register_broker(1, "", None, True)


def test_a_fence_committed_without_its_partition_changes_is_finished_by_tick(cluster):
    """The raft adapter may split a big decision; a controller can die in between."""
    h = cluster(3)
    h.create("t", partitions=3, rf=3)
    h.now_ms += 1_000
    h.heartbeat(2)
    h.heartbeat(3)
    d = h.m.tick(h.now_ms)
    fence_only = [r for r in d.records if isinstance(r, R.FenceBrokerRecord)]
    for rec in fence_only:  # the partition changes were lost with the old controller
        h.image.apply(rec)
        h.recent.append(h.image.version, rec)
    h.m.activate(h.now_ms)
    h.tick(1)
    for p in h.image.topics["t"].partitions:
        assert 1 not in p.isr and p.leader in (2, 3)
