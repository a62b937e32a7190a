"""The key-value form of the image rebuilds exactly the image records built."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.controller import records as R
from replication.controller.errors import ControllerError
from replication.controller.image import MetadataImage, TopicConfig
from replication.controller.kv import image_from_kv, image_to_kv, kv_updates, topic_sizes
from replication.controller.machine import ControllerMachine, CreateTopic, PutEntity


def _commit(image: MetadataImage, kv: dict[str, Any], recs: list[R.Record]) -> MetadataImage:
    sizes = topic_sizes(image, recs)
    after = image.copy()
    for r in recs:
        after.apply(r)
    for k, v in kv_updates(after, recs, sizes).items():
        if v is None:
            kv.pop(k, None)
        else:
            kv[k] = v
    return after


ops = st.lists(
    st.one_of(
        st.tuples(st.just("register"), st.integers(1, 4), st.booleans()),
        st.tuples(st.just("create"), st.sampled_from("abcde"), st.integers(1, 4)),
        st.tuples(st.just("delete"), st.sampled_from("abcde"), st.just(0)),
        st.tuples(st.just("heartbeat_expire"), st.integers(1, 4), st.just(0)),
        st.tuples(st.just("entity"), st.sampled_from("abcde"), st.integers(0, 3)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_incremental_key_updates_rebuild_the_same_image(seq: list[tuple[str, Any, Any]]) -> None:
    image = MetadataImage()
    kv: dict[str, Any] = {}
    image = _commit(image, kv, [R.ClusterRecord(cluster_id="c1")])
    now = 0
    for op, a, b in seq:
        m = ControllerMachine(image)
        m.activate(now)
        try:
            if op == "register":
                d = m.register_broker(a, f"http://n{a}", "z" + str(a % 2), b, now)
            elif op == "create":
                d = m.create_topic(CreateTopic(a, b, 1, TopicConfig()))
            elif op == "delete":
                d = m.delete_topic(a)
            elif op == "entity":
                # b == 0 deletes; otherwise a value bound to topic ``a`` (dies with it).
                value = None if b == 0 else {"topic": a, "n": b}
                d = m.put_entities([PutEntity("hook", a, value)])
            else:
                now += 60_000  # every session expires: fences everyone
                d = m.tick(now)
        except ControllerError:
            continue  # a refused command commits nothing
        image = _commit(image, kv, d.records)
        assert image_from_kv(kv).to_dict() == image.to_dict()
    assert image_from_kv(image_to_kv(image)).to_dict() == image.to_dict()
