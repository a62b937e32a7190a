"""Cluster-wide partition state: fan out to the brokers, short timeouts, a small cache.

Each broker answers ``/internal/v1/dashboard/state`` with the live state of
the partitions it leads (``local.broker_state``). A serving node asks only
the brokers it needs (the leaders of the partitions in question; every
unfenced broker for the dashboard), each answer is cached for ``ttl_ms`` and
concurrent readers share one request, so N dashboards and describe calls
cost at most one call per broker per ``ttl_ms``. A broker that does not
answer within ``timeout_ms`` counts as unreachable for that period. This
node's own state is read directly, never over HTTP; a standalone node has no
peers and so never fans out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import httpx
import orjson

from app.dashboard.cache import TtlCache
from replication.controller.image import NO_LEADER, PartitionMeta

if TYPE_CHECKING:
    from app.node import Node

STATE_PATH = "/internal/v1/dashboard/state"
DETAIL_PATH = "/internal/v1/dashboard/partitions"

Key = tuple[str, int]


class BrokerStates:
    """Per-broker cached state reports; ``None`` for a broker that could not be asked."""

    def __init__(
        self, node: Node, local: Callable[[], dict[str, Any]], ttl_ms: int = 400, timeout_ms: int = 800
    ) -> None:
        self.node = node
        self.local = local
        self.timeout_s = timeout_ms / 1000
        self._states: TtlCache[dict[str, Any] | None] = TtlCache(ttl_ms / 1000)
        self._details: TtlCache[dict[str, Any] | None] = TtlCache(ttl_ms / 1000)
        self.calls = 0
        """Internal HTTP calls made (the cache's effect is visible in benchmarks)."""

    # ---- raw reports ---------------------------------------------------------------------
    async def _get(self, broker: int, path: str, params: dict[str, Any] | None = None) -> dict[str, Any] | None:
        b = self.node.image.brokers.get(broker)
        if b is None:
            return None
        self.calls += 1
        try:
            resp = await self.node.peers.http.get(
                b.url + path, params=params, headers=self.node.peers.auth_headers(),
                timeout=self.timeout_s,
            )
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        try:
            data = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            return None
        return data if isinstance(data, dict) else None

    async def state(self, broker: int) -> dict[str, Any] | None:
        if broker == self.node.settings.node_id:
            return await self._states.get(broker, self._local_state)
        return await self._states.get(broker, lambda: self._get(broker, STATE_PATH))

    async def _local_state(self) -> dict[str, Any] | None:
        return self.local()

    async def states(self, brokers: Iterable[int]) -> dict[int, dict[str, Any] | None]:
        ids = sorted(set(brokers))
        got = await asyncio.gather(*(self.state(b) for b in ids))
        return dict(zip(ids, got, strict=True))

    async def detail(
        self, broker: int, topic: str, partition: int,
        local: Callable[[], Any],
    ) -> dict[str, Any] | None:
        """One broker's events (and samples, on the leader) for one partition."""
        key = (broker, topic, partition)
        if broker == self.node.settings.node_id:
            return await self._details.get(key, local)
        path = f"{DETAIL_PATH}/{topic}/{partition}"
        return await self._details.get(key, lambda: self._get(broker, path))

    # ---- merged views --------------------------------------------------------------------
    def unfenced_brokers(self) -> list[int]:
        return [b.broker_id for b in self.node.image.brokers.values() if not b.fenced]

    async def leader_reports(
        self, metas: Iterable[PartitionMeta], fresh_topic: str | None = None
    ) -> dict[Key, dict[str, Any]]:
        """The leader's own live report for each partition that another broker leads.

        ``fresh_topic``: ask each leader now for that topic only, bypassing the
        cache. The public describe routes do: a client that produced (acks=all)
        and then describes must see an HW at least as high as its write (the
        Spark source reads up to it); a dashboard may be 400 ms behind.
        """
        node = self.node
        want: dict[int, list[PartitionMeta]] = {}
        for m in metas:
            r = node.partitions.get((m.topic, m.partition))
            if m.leader == NO_LEADER or (r is not None and r.leader_state is not None):
                continue
            want.setdefault(m.leader, []).append(m)
        if not want:
            return {}
        if fresh_topic is not None:
            ids = sorted(want)
            got = await asyncio.gather(*(self._get(b, STATE_PATH, {"topic": fresh_topic}) for b in ids))
            index = leader_index(got)
        else:
            index = leader_index((await self.states(want)).values())
        return {
            (m.topic, m.partition): rep
            for ms in want.values() for m in ms
            if (rep := index.get((m.topic, m.partition))) is not None and rep["broker"] == m.leader
        }


def leader_index(states: Iterable[dict[str, Any] | None]) -> dict[Key, dict[str, Any]]:
    """``{(topic, partition): report}`` over brokers' state reports; where two brokers
    claim a partition (a deposed leader not yet told), the higher leader epoch wins."""
    out: dict[Key, dict[str, Any]] = {}
    for st in states:
        if not st:
            continue
        for topic, p, view in st["leaders"]:
            key = (topic, p)
            cur = out.get(key)
            if cur is None or view["leader_epoch"] > cur["leader_epoch"]:
                out[key] = view
    return out
