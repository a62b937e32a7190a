"""Push delivery across a leader kill -9 on a 3-node cluster (RF=3, min ISR 2).

The partition leader delivers; when it dies, the new leader resumes from the
cursor committed to cluster metadata. Nothing committed is lost; records the
dead leader delivered after its last cursor commit are delivered again, and
the test counts them and checks they all lie at or after the cursor the
cluster had committed before the kill.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.replication.conftest import (
    FAST_ENV,
    alive,
    create_replicated,
    eventually,
    leader_state,
    produce_retrying,
    read_all,
)
from tests.integration.subscriptions.conftest import PUSH_ENV
from tests.support.node import ClusterProcesses
from tests.support.receiver import Receiver

TOTAL = 240


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path, 3, env={**FAST_ENV, **PUSH_ENV})
    c.start()
    yield c
    c.kill_all()


def test_each_partition_is_delivered_by_its_leader_only(
    cluster: ClusterProcesses, receiver_factory: Callable[..., Receiver]
) -> None:
    states = create_replicated(cluster, "spread", partitions=3)
    leaders = {s["partition"]: s["leader"] for s in states}
    assert len(set(leaders.values())) > 1, f"placement put every leader on one broker: {leaders}"
    rc = receiver_factory()
    # Created through a node that leads none of them when possible: any node serves the API.
    r = httpx.post(f"{cluster.node(3).url}/v1/subscriptions", timeout=30, json={
        "id": "spread", "topic": "spread", "url": rc.url, "start": "earliest", "batch_size": 5,
    })
    assert r.status_code == 201, r.text
    for p in range(3):
        httpx.post(f"{cluster.node(1).url}/v1/topics/spread/partitions/{p}/records", timeout=30,
                   json={"records": [{"value": [p, i]} for i in range(30)]}).raise_for_status()
    for p in range(3):
        assert rc.wait_offsets(p, 30) == list(range(30))
        senders = {x.headers["tidelog-broker"] for x in rc.accepted() if x.body["partition"] == p}
        assert senders == {str(leaders[p])}, f"partition {p} delivered by {senders}, leader {leaders[p]}"
    # Every node reports the same committed progress (the status lives in cluster metadata).
    for n in cluster.nodes:
        eventually(lambda n=n: all(
            x["committed_cursor"] == 30 for x in httpx.get(f"{n.url}/v1/subscriptions/spread", timeout=2)
            .json()["status"]["partitions"]), what=f"node {n.node_id} sees every cursor at 30")


def _partition_status(url: str, sid: str) -> dict:
    r = httpx.get(f"{url}/v1/subscriptions/{sid}", timeout=2)
    r.raise_for_status()
    return r.json()["status"]["partitions"][0]


@pytest.mark.slow  # ~30 s on 2 cores: cluster start, a session timeout, failover
def test_leader_kill_resumes_delivery_from_the_committed_cursor(
    cluster: ClusterProcesses, receiver_factory: Callable[..., Receiver]
) -> None:
    [state] = create_replicated(cluster, "pushed")
    old = state["leader"]
    rc = receiver_factory(delay_s=0.03)  # slower than the producer: delivery is in flight at the kill
    r = httpx.post(f"{cluster.node(1).url}/v1/subscriptions", timeout=30, json={
        "id": "fo", "topic": "pushed", "url": rc.url, "start": "earliest", "batch_size": 10,
    })
    assert r.status_code == 201, r.text
    nodes: Callable[[], list] = lambda: alive(cluster)  # noqa: E731
    r = httpx.post(f"{cluster.node(old).url}/v1/topics/pushed/partitions/0/records", timeout=30,
                   json={"records": [{"value": i} for i in range(TOTAL // 2)]})
    assert r.status_code == 200, r.text
    # The cursor as committed to metadata, read on a follower (it only has the committed state).
    follower = next(n for n in cluster.nodes if n.node_id != old)
    committed = eventually(
        lambda: (c := _partition_status(follower.url, "fo")["committed_cursor"]) >= 40 and c,
        what="a committed cursor",
    )
    cluster.node(old).kill()
    eventually(rc.idle, what="requests in flight at the kill answered")
    before = len(rc.offsets(0))
    for i in range(TOTAL // 2, TOTAL):
        produce_retrying(nodes, "pushed", 0, i)
    new = eventually(lambda: leader_state(cluster, "pushed", 0), what="a new leader")
    assert new["leader"] != old
    log = read_all(alive(cluster)[0], "pushed", 0)
    assert [v for _, v in log][:TOTAL // 2] == list(range(TOTAL // 2))
    got = rc.wait_offsets(0, len(log), timeout_s=60)
    values = rc.values(0)
    assert all(values[o] == v for o, v in log), "a delivered record differs from the log"
    counts = Counter(got)
    dups = sorted(o for o, n in counts.items() if n > 1)
    assert all(n <= 2 for n in counts.values())
    resumed_at = got[before]
    assert resumed_at >= committed, "the new leader started before the committed cursor"
    assert dups == list(range(resumed_at, resumed_at + len(dups))), "duplicates outside the window"
    assert len(dups) <= before - committed, "more duplicates than deliveries after the last commit"
    st = eventually(
        lambda: (s := _partition_status(cluster.node(new["leader"]).url, "fo"))["lag"] == 0
        and s["cursor"] == len(log) and s,
        what="the new leader caught up",
    )
    assert st["delivering_here"] and st["dead_lettered"] == 0
    print(f"leader kill: {len(dups)} duplicates of {len(log)} records "
          f"(committed cursor {committed}, resumed at {resumed_at}, {before} delivered before the kill)")
