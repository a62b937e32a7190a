"""Unclean leader election on real processes (seed 001 §6.8; Kafka's unclean.leader.election).

With every ISR member gone, a topic that allows it elects an out-of-sync
replica: the partition comes back, flagged ``last_election_unclean``, and the
records only the lost leader held are gone. When that old leader returns it
truncates to the new leader's log instead of resurrecting them. A topic that
does not allow it stays offline.

Losing two of three brokers would also lose the controller quorum, so these
clusters have one controller voter (node 1) and three observer brokers, and
the tests use a partition whose replicas are all observers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.replication.conftest import (
    FAST_ENV,
    alive,
    eventually,
    leader_state,
    produce_retrying,
    read_all,
)
from tests.support.node import ClusterProcesses


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path, 1, env=FAST_ENV, observers=3)
    c.start()
    yield c
    c.kill_all()


def _partition(n_url: str, topic: str, p: int) -> dict[str, Any]:
    return httpx.get(f"{n_url}/v1/topics/{topic}/partitions/{p}", timeout=2).raise_for_status().json()


def _set_unclean(c: ClusterProcesses, topic: str, allowed: bool) -> tuple[int, dict[str, Any]]:
    """Create the topic; its first partition without the controller node among its replicas."""
    eventually(lambda: len(httpx.get(f"{c.node(1).url}/v1/cluster", timeout=2).json()["brokers"]) == 4,
               what="all four brokers registered")
    with c.node(1).client() as cl:
        cl.create_topic(topic, partitions=4, replication_factor=3,
                        config={"min_insync_replicas": 1, "unclean_leader_election": allowed})
    p = next(p for p in range(4) if 1 not in _partition(c.node(1).url, topic, p)["replicas"])
    s = eventually(lambda: (s := leader_state(c, topic, p)) and len(s["isr"]) == 3 and s,
                   what=f"{topic}/{p} fully in sync")
    return p, s


def test_unclean_election_brings_back_an_offline_partition_and_the_old_leader_truncates(
    cluster: ClusterProcesses,
) -> None:
    p, state = _set_unclean(cluster, "u", True)
    leader = cluster.node(state["leader"])
    f1, f2 = (cluster.node(b) for b in state["replicas"] if b != leader.node_id)
    for i in range(10):
        produce_retrying(lambda: [leader], "u", p, i)
    f1.kill()
    f2.kill()
    eventually(lambda: (s := leader_state(cluster, "u", p)) and s["isr"] == [leader.node_id],
               timeout_s=60, what="ISR shrunk to the leader alone")
    for i in range(10, 15):  # committed with min ISR 1: only the leader holds them
        produce_retrying(lambda: [leader], "u", p, i)
    leader.kill()
    f1.start(wait_ready_s=0)
    f2.start(wait_ready_s=0)
    f1.wait_ready(60)
    f2.wait_ready(60)

    def unclean_leader() -> dict[str, Any] | None:
        s = leader_state(cluster, "u", p)
        return s if s and s["leader"] in (f1.node_id, f2.node_id) and s["last_election_unclean"] else None

    s = eventually(unclean_leader, timeout_s=90, what="an unclean leader among the restarted followers")
    new_leader = cluster.node(s["leader"])
    assert [v for _, v in read_all(new_leader, "u", p)] == list(range(10))  # 10..14 are lost
    produce_retrying(lambda: alive(cluster), "u", p, "after")

    leader.start()  # the old leader comes back holding 10..14: it must truncate them away
    def converged() -> bool:
        s = leader_state(cluster, "u", p)
        if not s or leader.node_id not in s["isr"]:
            return False
        mine = next(r for r in s["replica_states"] if r["broker"] == leader.node_id)
        return bool(mine["log_end_offset"] == s["log_end_offset"] == 11)

    eventually(converged, timeout_s=90, what="the old leader back in the ISR with the new log")
    assert [v for _, v in read_all(leader, "u", p)] == [*range(10), "after"]
    events = httpx.get(f"{new_leader.url}/v1/topics/u/partitions/{p}/events", timeout=5).json()["events"]
    assert any("unclean" in (e["kind"] + e["reason"]) for e in events), events


def test_without_unclean_election_the_partition_stays_offline_until_an_isr_member_returns(
    cluster: ClusterProcesses,
) -> None:
    p, state = _set_unclean(cluster, "c", False)
    leader = cluster.node(state["leader"])
    f1, f2 = (cluster.node(b) for b in state["replicas"] if b != leader.node_id)
    f1.kill()
    f2.kill()
    eventually(lambda: (s := leader_state(cluster, "c", p)) and s["isr"] == [leader.node_id],
               timeout_s=60, what="ISR shrunk to the leader alone")
    produce_retrying(lambda: [leader], "c", p, "only-on-leader")
    leader.kill()
    f1.start()
    eventually(lambda: _partition(f1.url, "c", p)["status"] == "offline", timeout_s=60, what="offline")
    assert _partition(f1.url, "c", p)["leader"] is None
    leader.start()
    s = eventually(lambda: (s := leader_state(cluster, "c", p)) and s["leader"] == leader.node_id and s,
                   timeout_s=90, what="the last ISR member leads again")
    assert not s["last_election_unclean"]
    assert [v for _, v in read_all(leader, "c", p)] == ["only-on-leader"]
