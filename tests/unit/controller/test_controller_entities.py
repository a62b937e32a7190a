"""Configuration entities (hook configs, subscriptions) in the metadata image."""

from __future__ import annotations

import pytest

from replication.controller import records as R
from replication.controller.errors import ControllerError
from replication.controller.image import MetadataImage
from replication.controller.kv import image_from_kv, image_to_kv
from replication.controller.machine import ControllerMachine, PutEntity


def test_an_entity_is_set_read_and_deleted_through_committed_records(cluster):
    h = cluster(1)
    h.commit(h.m.put_entities([PutEntity("subscription", "s1", {"topic": "t", "url": "http://x"})]))
    assert h.image.entity("subscription", "s1") == {"topic": "t", "url": "http://x"}
    assert h.image.entities_of("subscription") == {"s1": {"topic": "t", "url": "http://x"}}
    h.commit(h.m.put_entities([PutEntity("subscription", "s1", None)]))
    assert h.image.entity("subscription", "s1") is None
    assert h.image.entities == {}


def test_create_only_write_is_idempotent_for_the_same_value_and_refuses_another():
    image = MetadataImage(cluster_id="c")
    m = ControllerMachine(image)
    for r in m.put_entities([PutEntity("hook", "t", {"a": 1}, expect="absent")]).records:
        image.apply(r)
    again = m.put_entities([PutEntity("hook", "t", {"a": 1}, expect="absent")])
    assert again.existed and again.records == []
    with pytest.raises(ControllerError) as exc:
        m.put_entities([PutEntity("hook", "t", {"a": 2}, expect="absent")])
    assert exc.value.code == "ENTITY_EXISTS"
    with pytest.raises(ControllerError) as exc:
        m.put_entities([PutEntity("hook", "other", {"a": 2}, expect="present")])
    assert exc.value.code == "ENTITY_NOT_FOUND"


def test_a_batch_sees_its_own_earlier_writes_and_fails_as_a_whole(cluster):
    h = cluster(1)
    d = h.m.put_entities(
        [PutEntity("sub", "a", {"v": 1}, expect="absent"), PutEntity("sub", "a", {"v": 2}, expect="present")]
    )
    assert [r.value for r in d.records if isinstance(r, R.EntityRecord)] == [{"v": 1}, {"v": 2}]
    with pytest.raises(ControllerError):
        h.m.put_entities([PutEntity("sub", "b", {"v": 1}), PutEntity("sub", "c", {"v": 1}, expect="present")])
    h.commit(d)
    assert h.image.entity("sub", "a") == {"v": 2} and h.image.entity("sub", "b") is None


@pytest.mark.parametrize(("kind", "name"), [("Bad", "x"), ("hook", "a/b"), ("", "x"), ("hook", "")])
def test_entity_names_are_validated(cluster, kind, name):
    h = cluster(1)
    with pytest.raises(ControllerError) as exc:
        h.m.put_entities([PutEntity(kind, name, {"v": 1})])
    assert exc.value.code == "INVALID_REQUEST"


def test_deleting_a_topic_deletes_the_entities_bound_to_it(cluster):
    h = cluster(3)
    h.create("t", partitions=1, rf=1)
    h.create("u", partitions=1, rf=1)
    h.commit(
        h.m.put_entities(
            [
                PutEntity("hook", "t", {"topic": "t"}),
                PutEntity("subscription", "s-t", {"topic": "t"}),
                PutEntity("subscription", "s-u", {"topic": "u"}),
            ]
        )
    )
    h.commit(h.m.delete_topic("t"))
    assert h.image.entities == {"subscription": {"s-u": {"topic": "u"}}}


def test_entities_survive_snapshot_and_key_value_round_trips(cluster):
    h = cluster(1)
    h.commit(h.m.put_entities([PutEntity("hook", "t", {"k": [1, 2]}), PutEntity("sub", "x", {"z": None})]))
    assert MetadataImage.from_dict(h.image.to_dict()).entities == h.image.entities
    assert image_from_kv(image_to_kv(h.image)).entities == h.image.entities
