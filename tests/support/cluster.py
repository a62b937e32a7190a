"""Questions asked of a running cluster of real nodes, shared by integration and fault tests.

Every wait polls with a deadline (``eventually``); requests carry short timeouts
so a paused (SIGSTOP) or cut-off node cannot stall a polling loop for long.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx

from app.client import Client
from tests.support.node import ClusterProcesses, NodeProcess

T = TypeVar("T")


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
    """The controller every live node agrees on, or None."""
    seen = set()
    for n in alive(c):
        seen.add(httpx.get(f"{n.url}/v1/cluster", timeout=2).json()["controller"]["node_id"])
    return seen.pop() if len(seen) == 1 and None not in seen else None


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
