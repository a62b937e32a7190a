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
from tests.support.cluster import (  # noqa: F401 - re-exported for the tests here
    active_controller,
    alive,
    describe,
    leader_state,
    read_all,
)
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
