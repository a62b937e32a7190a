"""AlterPartition validation (seed 001 §6.3 rule 4, §6.5.1 case 3, §6.5.2)."""

from __future__ import annotations

import pytest

from replication.controller import records as R
from replication.controller.errors import ControllerError
from replication.controller.image import ONLINE
from replication.controller.machine import AlterPartition


def refused(h, code: str, *args, **kwargs) -> None:
    version = h.image.version
    with pytest.raises(ControllerError) as exc:
        h.alter(*args, **kwargs)
    assert exc.value.code == code, exc.value.detail
    assert h.image.version == version, "a refused request commits nothing"


@pytest.fixture
def h(cluster):
    """Three brokers, topic ``t`` with one partition led by broker 1, ISR [1, 2, 3]."""
    h = cluster(3)
    h.create("t", rf=3)
    assert h.part().leader == 1 and h.part().isr == (1, 2, 3)
    return h


def test_accepted_shrink_bumps_the_partition_epoch_but_not_the_leader_epoch(h):
    d = h.alter((1, 2))
    assert d.records == [
        R.PartitionChangeRecord(topic="t", partition=0, isr=[1, 2], partition_epoch=1)
    ]
    p = h.part()
    assert (p.isr, p.partition_epoch, p.leader_epoch) == ((1, 2), 1, 0)


def test_expansion_with_the_added_replicas_current_broker_epoch_is_accepted(h):
    h.alter((1, 2))
    h.alter((1, 2, 3))
    assert h.part().isr == (1, 2, 3) and h.part().partition_epoch == 2


def test_stale_partition_epoch_is_refused(h):
    h.alter((1, 2))
    refused(h, "INVALID_PARTITION_EPOCH", (1,), partition_epoch=0)


def test_stale_leader_epoch_is_fenced_and_a_future_one_is_unknown(h):
    h.pass_time(1_000, silent=(1,))  # leader 1 fenced: new leader, leader epoch 1
    h.confirm()
    leader = h.part().leader
    refused(h, "FENCED_LEADER_EPOCH", (leader,), leader_epoch=0)
    refused(h, "UNKNOWN_LEADER_EPOCH", (leader,), leader_epoch=7)


def test_only_the_current_leader_may_alter_the_isr(h):
    refused(h, "NOT_LEADER", (1, 2), sender=2)


def test_the_deposed_leaders_request_is_refused_after_a_fence(h):
    epoch = h.epochs[1]
    h.pass_time(1_000, silent=(1,))
    h.heartbeat(1)  # back (unfenced) at the same epoch, no longer leader
    refused(h, "FENCED_LEADER_EPOCH", (1, 2), sender=1, broker_epoch=epoch, leader_epoch=0)


def test_the_isr_may_not_lose_the_leader_or_become_empty_or_leave_the_replicas(h):
    refused(h, "INVALID_REQUEST", (2, 3))
    refused(h, "INVALID_REQUEST", ())
    refused(h, "INVALID_REQUEST", (1, 1, 2))
    h.register(4)
    refused(h, "INVALID_REQUEST", (1, 2, 3, 4))


def test_an_added_replica_needs_its_current_broker_epoch_case_3(h):
    """Seed 001 §6.5.1 case 3: an out-of-sync follower restarts uncleanly while the leader
    decides, from its last fetch at the old epoch, that it caught up."""
    h.alter((1, 2))
    old_epoch = h.epochs[3]
    h.register(3, clean=False)
    refused(h, "INELIGIBLE_REPLICA", (1, 2, 3), broker_epochs={3: old_epoch})
    refused(h, "INELIGIBLE_REPLICA", (1, 2, 3), broker_epochs={})
    # Fetching again at its new epoch, it catches up: the leader's proof is accepted.
    h.alter((1, 2, 3), broker_epochs={3: h.epochs[3]})
    assert h.part().isr == (1, 2, 3)


def test_a_fenced_replica_cannot_be_added(h):
    h.alter((1, 2))
    h.pass_time(1_000, silent=(3,))
    refused(h, "INELIGIBLE_REPLICA", (1, 2, 3), broker_epochs={3: h.epochs[3]})


def test_an_unknown_replica_cannot_be_added(h):
    refused(h, "INVALID_REQUEST", (1, 9), broker_epochs={9: 1})


def test_epochs_given_for_retained_members_are_checked_too(h):
    refused(h, "INELIGIBLE_REPLICA", (1, 2), broker_epochs={2: h.epochs[2] - 1})


def test_sender_with_a_stale_broker_epoch_or_fenced_is_refused(h):
    refused(h, "STALE_BROKER_EPOCH", (1, 2), broker_epoch=h.epochs[1] - 1)
    h.pass_time(1_000, silent=(1,))
    refused(h, "BROKER_FENCED", (1, 2), sender=1, leader_epoch=0, partition_epoch=0)


def test_unknown_topic_or_partition(h):
    for topic, partition, code in (("nope", 0, "TOPIC_NOT_FOUND"), ("t", 5, "PARTITION_NOT_FOUND")):
        req = AlterPartition(1, h.epochs[1], topic, partition, 0, 0, (1,))
        with pytest.raises(ControllerError) as exc:
            h.m.alter_partition(req)
        assert exc.value.code == code


def test_unchanged_isr_commits_nothing(h):
    d = h.alter((1, 2, 3))
    assert d.records == [] and d.existed


def test_an_unclean_broker_returns_to_the_isr_only_through_the_leader(h):
    """Seed 001 §6.5.1 case 1: fenced, registers unclean, catches up, re-added."""
    h.pass_time(1_000, silent=(2,))
    h.register(2, clean=False)
    assert 2 not in h.part().isr
    h.alter((1, 3, 2), broker_epochs={2: h.epochs[2]})
    assert 2 in h.part().isr


def test_a_candidates_alter_partition_confirms_its_leadership(h):
    h.pass_time(1_000, silent=(1,))
    p = h.part()
    assert p.status == "election"
    h.alter((p.leader,))
    assert h.part().status == ONLINE
    assert h.part().isr == (p.leader,)
