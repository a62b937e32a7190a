"""Topic create/delete and replica assignment across brokers and zones."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replication.controller import records as R
from replication.controller.assignment import assign_replicas
from replication.controller.errors import ControllerError
from replication.controller.image import TopicConfig
from replication.controller.machine import CreateTopic, validate_topic_name


def test_topic_create_starts_every_partition_online_with_full_isr(cluster):
    h = cluster(3)
    h.create("t", partitions=4, rf=3)
    for i, p in enumerate(h.image.topics["t"].partitions):
        assert p.partition == i
        assert p.isr == p.replicas and p.leader == p.replicas[0]
        assert (p.leader_epoch, p.partition_epoch, p.status) == (0, 0, "online")
        assert p.last_election_unclean is False


def test_topic_create_is_idempotent_and_refuses_another_spec(cluster):
    h = cluster(3)
    h.create("t", partitions=2, rf=2)
    version = h.image.version
    again = h.create("t", partitions=2, rf=2)
    assert again.existed and again.records == [] and h.image.version == version
    with pytest.raises(ControllerError) as exc:
        h.create("t", partitions=3, rf=2)
    assert exc.value.code == "TOPIC_EXISTS"


@pytest.mark.parametrize(
    ("name", "partitions", "rf", "config", "code"),
    [
        ("bad/name", 1, 1, {}, "INVALID_TOPIC_NAME"),
        ("__internal", 1, 1, {}, "INVALID_TOPIC_NAME"),
        ("..", 1, 1, {}, "INVALID_TOPIC_NAME"),
        ("t", 0, 1, {}, "INVALID_REQUEST"),
        ("t", 1, 0, {}, "INVALID_REPLICATION_FACTOR"),
        ("t", 1, 4, {}, "INVALID_REPLICATION_FACTOR"),
        ("t", 1, 2, {"min_insync_replicas": 3}, "INVALID_CONFIG"),
    ],
)
def test_topic_create_validation(cluster, name, partitions, rf, config, code):
    h = cluster(3)
    with pytest.raises(ControllerError) as exc:
        h.m.create_topic(CreateTopic(name, partitions, rf, TopicConfig(**config)))
    assert exc.value.code == code


def test_internal_names_are_allowed_for_tidelog_itself():
    validate_topic_name("__consumer_offsets", allow_internal=True)


def test_replication_factor_counts_only_live_brokers(cluster):
    h = cluster(3)
    h.pass_time(1_000, silent=(3,))
    with pytest.raises(ControllerError) as exc:
        h.create("t", rf=3)
    assert exc.value.code == "INVALID_REPLICATION_FACTOR"
    h.create("t", partitions=4, rf=2)
    assert all(3 not in p.replicas for p in h.image.topics["t"].partitions)


def test_topic_delete_removes_it_and_unknown_topics_are_refused(cluster):
    h = cluster(3)
    h.create("t")
    d = h.commit(h.m.delete_topic("t"))
    assert d.records == [R.RemoveTopicRecord("t")]
    assert "t" not in h.image.topics
    with pytest.raises(ControllerError) as exc:
        h.m.delete_topic("t")
    assert exc.value.code == "TOPIC_NOT_FOUND"


def test_a_recreated_topic_gets_a_new_topic_id(cluster):
    h = cluster(3)
    h.create("t")
    first = h.image.topics["t"].topic_id
    h.commit(h.m.delete_topic("t"))
    h.create("t")
    assert h.image.topics["t"].topic_id != first


def test_replicas_of_a_partition_land_in_distinct_zones(cluster):
    h = cluster(6, zones=["a", "a", "b", "b", "c", "c"])
    h.create("t", partitions=12, rf=3)
    for p in h.image.topics["t"].partitions:
        zones = {h.image.brokers[b].zone for b in p.replicas}
        assert zones == {"a", "b", "c"}


def test_leaders_spread_evenly_across_brokers_and_zones(cluster):
    h = cluster(6, zones=["a", "a", "b", "b", "c", "c"])
    h.create("t", partitions=12, rf=3)
    leaders = Counter(p.leader for p in h.image.topics["t"].partitions)
    assert set(leaders.values()) == {2}
    zones = Counter(h.image.brokers[b].zone for b in leaders.elements())
    assert set(zones.values()) == {4}


def test_a_new_topic_fills_the_least_loaded_brokers(cluster):
    h = cluster(3)
    h.create("a", partitions=1, rf=1)  # broker 1 now has one replica and one leader
    h.create("b", partitions=2, rf=1)
    assert sorted(p.leader for p in h.image.topics["b"].partitions) == [2, 3]


def test_zone_spread_wins_over_broker_balance_when_a_zone_is_small():
    zones = {1: "a", 2: "a", 3: "a", 4: "b"}
    for r in assign_replicas([1, 2, 3, 4], 8, 2, zones=zones):
        assert {zones[b] for b in r} == {"a", "b"}, "a zone outage costs one replica at most"


@settings(max_examples=200, deadline=None)
@given(
    brokers=st.integers(1, 12),
    zone_count=st.integers(0, 4),
    partitions=st.integers(1, 60),
    data=st.data(),
)
def test_assignment_balances_replicas_and_leaders_within_one(brokers, zone_count, partitions, data):
    rf = data.draw(st.integers(1, brokers))
    ids = list(range(100, 100 + brokers))
    if zone_count and brokers % zone_count:
        zone_count = 0  # balance within one is only promised for equal-sized zones
    zones = {b: (f"z{i % zone_count}" if zone_count else None) for i, b in enumerate(ids)}
    out = assign_replicas(ids, partitions, rf, zones=zones)
    assert len(out) == partitions
    replicas = Counter(b for r in out for b in r)
    leaders = Counter(r[0] for r in out)
    assert max(replicas[b] for b in ids) - min(replicas[b] for b in ids) <= 1
    assert max(leaders[b] for b in ids) - min(leaders[b] for b in ids) <= 1
    for r in out:
        assert len(set(r)) == rf
        if zone_count:
            assert len({zones[b] for b in r}) == min(rf, zone_count)


@settings(max_examples=100, deadline=None)
@given(
    zone_of=st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=9),
    partitions=st.integers(1, 30),
    data=st.data(),
)
def test_assignment_uses_distinct_zones_whenever_possible(zone_of, partitions, data):
    ids = list(range(len(zone_of)))
    rf = data.draw(st.integers(1, len(ids)))
    zones = dict(zip(ids, zone_of, strict=True))
    distinct = len({z if z is not None else f"none{b}" for b, z in zones.items()})
    for r in assign_replicas(ids, partitions, rf, zones=zones):
        used = {zones[b] if zones[b] is not None else f"none{b}" for b in r}
        assert len(used) == min(rf, distinct)


def test_assignment_refuses_more_replicas_than_brokers():
    with pytest.raises(ValueError):
        assign_replicas([1, 2], 1, 3)
