"""One per node: the history sampler, the broker-state aggregation and the snapshot cache."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from app.dashboard.aggregate import BrokerStates, Key
from app.dashboard.cache import TtlCache
from app.dashboard.history import HistorySampler
from app.dashboard.local import broker_state, partition_detail
from app.dashboard.snapshot import build_snapshot

if TYPE_CHECKING:
    from app.node import Node

PUSH_INTERVAL_MS = 1000
"""SSE push period; the client treats 5 s of silence as a lost connection (a hung node)."""
CACHE_TTL_MS = 400
"""Shorter than the push period, so each push carries fresh data, long enough that many
dashboards and describe calls share one fan-out."""
FANOUT_TIMEOUT_MS = 800


class Dashboard:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.sampler = HistorySampler(node.partitions)
        self.states = BrokerStates(
            node, lambda: broker_state(node, self.sampler), CACHE_TTL_MS, FANOUT_TIMEOUT_MS
        )
        self._snapshots: TtlCache[bytes] = TtlCache(CACHE_TTL_MS / 1000, max_entries=256)
        self.stopping = False

    def start(self) -> None:
        self.sampler.start()

    async def stop(self) -> None:
        self.stopping = True
        await self.sampler.stop()

    async def snapshot(self, detail: Key | None = None) -> dict[str, Any]:
        return await build_snapshot(self.node, self.states, self.sampler, detail)

    async def snapshot_json(self, detail: Key | None = None) -> bytes:
        """Serialized snapshot shared by every reader within ``CACHE_TTL_MS``."""

        async def make() -> bytes:
            return orjson.dumps(await self.snapshot(detail))

        return await self._snapshots.get(detail, make)

    async def local_state(self) -> dict[str, Any] | None:
        return await self.states.state(self.node.settings.node_id)

    async def local_detail(self, topic: str, partition: int) -> dict[str, Any]:
        return await partition_detail(self.node, self.sampler, topic, partition)
