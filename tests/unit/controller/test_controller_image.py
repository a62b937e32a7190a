"""The image: versions, JSON snapshots, record replay and deltas for brokers."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from replication.controller import records as R
from replication.controller.deltas import RecentRecords, apply_delta, delta_response
from replication.controller.errors import ControllerError
from replication.controller.image import MetadataImage
from replication.controller.invariants import violations


def test_every_committed_record_bumps_the_metadata_version(cluster):
    h = cluster(3)
    assert h.image.version == 3
    d = h.create("t", partitions=2, rf=2)
    assert h.image.version == 3 + len(d.records) == 6


def test_records_round_trip_through_json(cluster):
    h = cluster(3)
    h.create("t", partitions=2, rf=3, unclean_leader_election=True)
    h.pass_time(1_000, silent=(1,))
    h.heartbeat(1)
    assert any(isinstance(r, R.FenceBrokerRecord) for r in h.log)
    for rec in h.log:
        assert R.record_from_dict(json.loads(json.dumps(rec.to_dict()))) == rec


def test_a_partition_change_applied_twice_fails_loudly(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    d = h.alter((1, 2))
    with pytest.raises(ValueError):
        h.image.apply(d.records[0])


def test_fence_of_a_superseded_epoch_changes_nothing_when_applied(cluster):
    h = cluster(2)
    old = h.epochs[1]
    h.register(1)
    h.image.apply(R.FenceBrokerRecord(1, old))
    assert not h.image.brokers[1].fenced


def test_full_image_round_trips_through_json(cluster):
    h = cluster(3, zones=["a", "b", None])
    h.create("t", partitions=3, rf=2, retention_ms=1000)
    h.pass_time(1_000, silent=(2,))
    snapshot = json.loads(json.dumps(h.image.to_dict()))
    assert MetadataImage.from_dict(snapshot) == h.image


def test_recent_records_answer_deltas_or_none_when_too_far_behind():
    recent = RecentRecords(capacity=3, version=10)
    assert recent.since(10) == [] and recent.since(9) is None
    recs = [R.RemoveTopicRecord(name=str(i)) for i in range(5)]
    recent.extend(11, recs)
    assert recent.latest_version == 15 and recent.oldest_version == 12
    assert recent.since(12) == recs[2:]
    assert recent.since(14) == recs[4:]
    assert recent.since(11) is None
    assert recent.since(15) == [] and recent.since(99) == []
    with pytest.raises(ValueError):
        recent.append(17, recs[0])


def test_a_broker_catches_up_by_deltas_or_by_snapshot(cluster):
    h = cluster(3)
    broker_view = MetadataImage.from_dict(h.image.to_dict())
    h.create("t", partitions=2, rf=3)
    h.pass_time(1_000, silent=(3,))
    body = json.loads(json.dumps(delta_response(h.image, h.recent, broker_view.version)))
    assert "records" in body
    assert apply_delta(broker_view, body) == h.image
    small = RecentRecords(capacity=1, version=h.image.version - 1)
    small.append(h.image.version, h.log[-1])
    body = delta_response(h.image, small, 0)
    assert "image" in body and apply_delta(MetadataImage(), body) == h.image


# -- random histories ---------------------------------------------------------

BROKERS = st.integers(1, 5)
TOPICS = st.sampled_from(["a", "b", "c"])
OPS = st.one_of(
    st.tuples(st.just("register"), BROKERS, st.sampled_from(["z1", "z2", None]), st.booleans()),
    st.tuples(st.just("heartbeat"), BROKERS, st.integers(-1, 100)),
    # Time passes while the brokers in the set stay silent (the rest heartbeat).
    st.tuples(st.just("silence"), st.integers(1, 1_500), st.sets(BROKERS, max_size=2)),
    st.tuples(st.just("create"), TOPICS, st.integers(1, 3), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("delete"), TOPICS),
    st.tuples(st.just("alter"), TOPICS, st.integers(0, 2), st.sets(BROKERS), st.booleans()),
    st.tuples(st.just("suspect"), TOPICS, st.integers(0, 2), BROKERS),
    st.tuples(st.just("confirm"), TOPICS, st.integers(0, 2)),
)


def run(h, op: tuple) -> None:  # type: ignore[type-arg]
    kind = op[0]
    if kind == "register":
        h.register(op[1], zone=op[2], clean=op[3])
    elif kind == "heartbeat" and op[1] in h.epochs:
        h.heartbeat(op[1], leos={(t, 0): op[2] for t in h.image.topics})
    elif kind == "silence":
        h.pass_time(op[1], step_ms=250, silent=tuple(op[2]))
    elif kind == "create":
        h.create(op[1], partitions=op[2], rf=op[3], unclean_leader_election=op[4])
    elif kind == "delete":
        h.commit(h.m.delete_topic(op[1]))
    elif kind == "alter" and h.image.partition(op[1], op[2]) is not None:
        p = h.part(op[1], op[2])
        isr = tuple(sorted(op[3] | {p.leader}))
        h.alter(isr, op[1], op[2], partition_epoch=p.partition_epoch - int(op[4]))
    elif kind == "suspect" and op[3] in h.epochs and h.image.partition(op[1], op[2]):
        h.suspect(op[3], op[1], op[2])
    elif kind == "confirm" and h.image.partition(op[1], op[2]) is not None:
        h.confirm(op[1], op[2])


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(OPS, max_size=60))
def test_random_histories_keep_invariants_and_replay_to_the_same_image(cluster, ops):
    h = cluster(4, zones=["z1", "z1", "z2", None])  # the factory builds a fresh harness
    h.create("a", partitions=3, rf=3)
    h.create("b", partitions=3, rf=2, unclean_leader_election=True)
    for op in ops:
        with contextlib.suppress(ControllerError):
            run(h, op)  # Harness.commit checks invariants and epoch monotonicity
    assert violations(h.image) == []
    for rec in h.log:
        if isinstance(rec, R.PartitionChangeRecord) and rec.leader is not None:
            event(f"elected status={rec.status} unclean={rec.last_election_unclean}")
        elif not isinstance(rec, R.PartitionChangeRecord):
            event(type(rec).__name__)
    replayed = MetadataImage(cluster_id="c1")
    for rec in h.log:
        replayed.apply(R.record_from_dict(json.loads(json.dumps(rec.to_dict()))))
    assert replayed == h.image
    assert MetadataImage.from_dict(json.loads(json.dumps(h.image.to_dict()))) == h.image
