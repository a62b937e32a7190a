"""Helpers for replication tests on a real 3-node cluster (RF=3, min ISR 2).

Every wait polls with a deadline; nothing sleeps a fixed time to make a test
pass and nothing asserts on elapsed time. Timeouts are short enough (session
3 s, replica lag 3 s, leader suspicion 2 s) that failover happens in seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from app.client import Client, TidelogError
from tests.support.node import ClusterProcesses, NodeProcess
from tests.support.waiting import eventually

T = TypeVar("T")

FAST_ENV = {
    "TIDELOG_SESSION_TIMEOUT_MS": "3000",
    "TIDELOG_HEARTBEAT_INTERVAL_MS": "300",
    "TIDELOG_REPLICA_LAG_TIME_MS": "3000",
    "TIDELOG_LEADER_TIMEOUT_MS": "2000",
    "TIDELOG_ELECTION_TIMEOUT_MS": "3000",
    "TIDELOG_METADATA_WAIT_MS": "2000",
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path, 3, env=FAST_ENV)
    c.start()
    yield c
    c.kill_all()


def alive(c: ClusterProcesses) -> list[NodeProcess]:
    return [n for n in c.nodes if n.alive]


def describe(n: NodeProcess, topic: str, partition: int) -> dict[str, Any]:
    # Short timeout: a paused (SIGSTOP) node must not stall a polling loop for long.
    return httpx.get(f"{n.url}/v1/topics/{topic}/partitions/{partition}", timeout=1.0) \
        .raise_for_status().json()


def leader_state(c: ClusterProcesses, topic: str, partition: int) -> dict[str, Any] | None:
    """The partition's state as its current leader reports it (None while unknown).

    "Current" is the newest leader epoch any live node knows: a node that was
    paused may still believe it leads at an older epoch.
    """
    views = []
    for n in alive(c):
        try:
            views.append(describe(n, topic, partition))
        except httpx.HTTPError:
            continue
    if not views:
        return None
    newest = max(views, key=lambda v: v["leader_epoch"])
    leader = newest["leader"]
    if leader is None or not c.node(leader).alive:
        return None
    try:
        s = describe(c.node(leader), topic, partition)
    except httpx.HTTPError:
        return None
    ok = s["leader"] == leader and s["leader_epoch"] == newest["leader_epoch"] and s["lrs"]
    return s if ok else None


def active_controller(c: ClusterProcesses) -> int | None:
    seen = set()
    for n in alive(c):
        seen.add(httpx.get(f"{n.url}/v1/cluster", timeout=2).json()["controller"]["node_id"])
    return seen.pop() if len(seen) == 1 and None not in seen else None


def create_replicated(
    c: ClusterProcesses, topic: str, partitions: int = 1, min_isr: int = 2
) -> list[dict[str, Any]]:
    """Create an RF=3 topic and wait until every partition has a full ISR on its leader."""
    eventually(lambda: active_controller(c), what="a controller")
    with c.node(1).client() as cl:
        cl.create_topic(topic, partitions=partitions, replication_factor=3,
                        config={"min_insync_replicas": min_isr})
    return [
        eventually(
            lambda p=p: (s := leader_state(c, topic, p)) and len(s["isr"]) == 3
            and len(s["lrs"]) == 3 and s,
            what=f"{topic}/{p} fully in sync",
        )
        for p in range(partitions)
    ]


def produce_retrying(
    nodes: Callable[[], list[NodeProcess]], topic: str, partition: int, value: Any,
    timeout_s: float = 60.0, acks: str = "all",
) -> int:
    """Produce one record, retrying through any live node until acknowledged; its offset."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    i = 0
    while time.monotonic() < deadline:
        live = nodes()
        n = live[i % len(live)]
        i += 1
        try:
            with Client(n.url, timeout_s=15) as cl:
                return int(cl.produce(topic, [{"value": value}], partition=partition,
                                      acks=acks, timeout_ms=5000)[0]["offset"])
        except (httpx.HTTPError, TidelogError) as e:
            last = e
            time.sleep(0.05)
    raise AssertionError(f"could not produce {value!r} within {timeout_s}s: {last!r}")


def read_all(n: NodeProcess, topic: str, partition: int, isolation: str = "committed"
             ) -> list[tuple[int, Any]]:
    """Every record ``(offset, value)`` from the log start, through ``n`` (forwarded to the leader)."""
    out: list[tuple[int, Any]] = []
    nxt: int | str = "earliest"
    with Client(n.url, timeout_s=15) as cl:
        while True:
            page = cl.fetch(topic, partition, nxt, max_records=5000, isolation=isolation)
            out += [(r["offset"], r["value"]) for r in page.records]
            if not page.records:
                return out
            nxt = page.next_offset
