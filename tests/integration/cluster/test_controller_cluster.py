"""A 3-node cluster of real processes: controller election, failover, fencing, forwarding.

Every node is a controller voter (raftos over UDP on loopback). Waits poll
with deadlines; nothing asserts on elapsed time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from app.client import Client
from tests.support.node import ClusterProcesses, NodeProcess
from tests.support.waiting import eventually

T = TypeVar("T")


def cluster_view(n: NodeProcess) -> dict[str, Any]:
    return httpx.get(f"{n.url}/v1/cluster", timeout=2).raise_for_status().json()


def active_controller(c: ClusterProcesses) -> int | None:
    """The controller every live node agrees on, or None."""
    seen = set()
    for n in c.nodes:
        if n.alive:
            seen.add(cluster_view(n)["controller"]["node_id"])
    return seen.pop() if len(seen) == 1 and None not in seen else None


def known_everywhere(c: ClusterProcesses, topic: str) -> None:
    """Wait until every live node's metadata has the topic (propagation is a long-poll away)."""
    for n in c.nodes:
        if n.alive:
            eventually(
                lambda n=n: httpx.get(f"{n.url}/v1/topics/{topic}", timeout=2).status_code == 200,
                what=f"{topic} known to node {n.node_id}",
            )


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path, 3, env={"TIDELOG_SESSION_TIMEOUT_MS": "3000",
                                            "TIDELOG_HEARTBEAT_INTERVAL_MS": "300"})
    c.start()
    yield c
    c.kill_all()


def test_three_nodes_elect_one_controller_and_topic_created_anywhere_is_seen_everywhere(
    cluster: ClusterProcesses,
) -> None:
    ctrl = eventually(lambda: active_controller(cluster), what="a controller")
    follower = next(n for n in cluster.nodes if n.node_id != ctrl)
    with follower.client() as c:
        created = c.create_topic("orders", partitions=6, replication_factor=3)
    assert len(created["partitions"]) == 6
    leaders = {p["leader"] for p in created["partitions"]}
    assert leaders == {1, 2, 3}, "leaders spread over all brokers"
    known_everywhere(cluster, "orders")
    for n in cluster.nodes:
        with n.client() as c:
            t = c.describe_topic("orders")
            assert [sorted(p["replicas"]) for p in t["partitions"]] == [[1, 2, 3]] * 6
    eventually(
        lambda: [b["status"] for b in cluster_view(cluster.node(1))["brokers"]] == ["alive"] * 3,
        what="three live brokers in node 1's metadata",
    )


def test_produce_and_fetch_through_any_node_are_forwarded_to_the_leader(
    cluster: ClusterProcesses,
) -> None:
    eventually(lambda: active_controller(cluster), what="a controller")
    with cluster.node(1).client() as c:
        t = c.create_topic("fwd", partitions=3, replication_factor=1)
    led_by = {p["partition"]: p["leader"] for p in t["partitions"]}
    known_everywhere(cluster, "fwd")
    for n in cluster.nodes:
        with n.client() as c:
            for p in range(3):
                c.produce("fwd", [{"value": f"from-{n.node_id}"}], partition=p)
    for p, leader in led_by.items():
        for n in cluster.nodes:
            with n.client() as c:
                page = c.fetch("fwd", p, 0)
                assert [r["value"] for r in page.records] == ["from-1", "from-2", "from-3"]
        assert leader in (1, 2, 3)


def test_killing_the_controller_elects_another_with_metadata_intact(
    cluster: ClusterProcesses,
) -> None:
    ctrl = eventually(lambda: active_controller(cluster), what="a controller")
    with cluster.node(ctrl).client() as c:
        c.create_topic("before", partitions=4, replication_factor=3)
    version_before = cluster_view(cluster.node(ctrl))["metadata_version"]
    cluster.node(ctrl).kill()
    # The survivors may report the dead leader for a while (raftos learns of its death
    # by election timeout); wait until they agree on a live one.
    new = eventually(
        lambda: (c := active_controller(cluster)) not in (None, ctrl) and c,
        timeout_s=30, what="a new controller",
    )
    survivor = cluster.node(new)
    known_everywhere(cluster, "before")  # committed before the kill, so it survives it
    with survivor.client() as c:
        assert len(c.describe_topic("before")["partitions"]) == 4
        c.create_topic("after", partitions=1, replication_factor=2)
    assert cluster_view(survivor)["metadata_version"] > version_before


def test_a_broker_that_stops_heartbeating_is_fenced_and_leaves_every_isr(
    cluster: ClusterProcesses,
) -> None:
    ctrl = eventually(lambda: active_controller(cluster), what="a controller")
    victim = next(n for n in cluster.nodes if n.node_id != ctrl)
    with cluster.node(ctrl).client() as c:
        c.create_topic("isr", partitions=3, replication_factor=3)
    victim.pause()  # SIGSTOP: no heartbeats, no answers
    try:
        def fenced() -> bool:
            b = {x["id"]: x for x in cluster_view(cluster.node(ctrl))["brokers"]}
            return b[victim.node_id]["status"] == "fenced"

        eventually(fenced, what="the paused broker fenced")
        with cluster.node(ctrl).client() as c:
            t = c.describe_topic("isr")
        for p in t["partitions"]:
            assert victim.node_id not in p["isr"]
            assert p["leader"] != victim.node_id
    finally:
        victim.resume()

    def unfenced() -> bool:
        b = {x["id"]: x for x in cluster_view(cluster.node(ctrl))["brokers"]}
        return b[victim.node_id]["status"] == "alive"

    eventually(unfenced, what="the resumed broker unfenced by its heartbeats")


def test_restarted_broker_gets_a_new_epoch_and_an_unclean_restart_is_flagged(
    cluster: ClusterProcesses,
) -> None:
    ctrl = eventually(lambda: active_controller(cluster), what="a controller")
    victim = next(n for n in cluster.nodes if n.node_id != ctrl)

    def broker(nid: int) -> dict[str, Any]:
        return {x["id"]: x for x in cluster_view(cluster.node(ctrl))["brokers"]}[nid]

    first = broker(victim.node_id)["broker_epoch"]
    victim.stop()  # SIGTERM: a clean shutdown
    victim.start()
    second = eventually(
        lambda: (b := broker(victim.node_id))["broker_epoch"] > first and b, what="new epoch"
    )
    assert second["clean"] is True
    victim.kill()  # unclean
    victim.start()
    third = eventually(
        lambda: (b := broker(victim.node_id))["broker_epoch"] > second["broker_epoch"] and b,
        what="epoch after unclean restart",
    )
    assert third["clean"] is False


def test_internal_endpoints_refuse_requests_without_the_cluster_secret(
    cluster: ClusterProcesses,
) -> None:
    n = cluster.node(1)
    r = httpx.post(f"{n.url}/internal/v1/controller/register", json={"broker_id": 9})
    assert r.status_code == 401 and r.json()["code"] == "UNAUTHORIZED"
    r = httpx.get(f"{n.url}/internal/v1/metadata", headers={"authorization": "Bearer nope"})
    assert r.status_code == 403 and r.json()["code"] == "FORBIDDEN"
    r = httpx.get(
        f"{n.url}/internal/v1/controller", headers={"authorization": f"Bearer {cluster.secret}"}
    )
    assert r.status_code == 200


def test_client_sees_problem_json_when_topic_missing_on_any_node(cluster: ClusterProcesses) -> None:
    with Client(cluster.node(2).url) as c, pytest.raises(Exception) as exc:
        c.describe_topic("nope")
    assert "TOPIC_NOT_FOUND" in str(exc.value)


def test_an_observer_broker_registers_hosts_replicas_and_forwards_without_voting(
    tmp_path: Path,
) -> None:
    c = ClusterProcesses(tmp_path, 3, observers=1, env={"TIDELOG_HEARTBEAT_INTERVAL_MS": "300"})
    c.start()
    try:
        ctrl = eventually(lambda: active_controller(c), what="a controller")
        assert ctrl in (1, 2, 3), "only voters can be the controller"
        observer = c.node(4)

        def voters_seen() -> dict[int, bool]:
            # The observer's image may trail the last registrations by a metadata poll.
            view = {b["id"]: b["voter"] for b in cluster_view(observer)["brokers"]}
            return view if len(view) == 4 else {}

        seen = eventually(voters_seen, what="all four brokers in the observer's metadata")
        assert seen == {1: True, 2: True, 3: True, 4: False}
        with observer.client() as cl:
            t = cl.create_topic("obs", partitions=4, replication_factor=1)
            assert 4 in {p["leader"] for p in t["partitions"]}, "the observer leads a share"
            for p in range(4):
                cl.produce("obs", [{"value": p}], partition=p)
        with c.node(1).client() as cl:
            assert [cl.fetch("obs", p, 0).records[0]["value"] for p in range(4)] == [0, 1, 2, 3]
    finally:
        c.kill_all()
