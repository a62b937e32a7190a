"""A tiny time-to-live cache with single flight: concurrent readers share one fetch."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    """``get(key, fetch)`` returns a value younger than ``ttl_s`` or runs ``fetch`` once.

    ``fetch`` should not raise (return an error value instead): a raised
    exception reaches every waiter and is not cached. The fetch runs in its own
    task, so a reader that goes away (a closed dashboard) does not cancel it
    for the others.
    """

    def __init__(self, ttl_s: float, max_entries: int = 1024) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._values: dict[Hashable, tuple[float, V]] = {}
        self._inflight: dict[Hashable, asyncio.Task[V]] = {}

    async def get(self, key: Hashable, fetch: Callable[[], Awaitable[V]]) -> V:
        now = time.monotonic()
        hit = self._values.get(key)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        task = self._inflight.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._run(key, fetch))
            self._inflight[key] = task
        return await asyncio.shield(task)

    async def _run(self, key: Hashable, fetch: Callable[[], Awaitable[V]]) -> V:
        try:
            value = await fetch()
        finally:
            self._inflight.pop(key, None)
        if len(self._values) >= self.max_entries:
            cutoff = time.monotonic() - self.ttl_s
            for k in [k for k, (t, _v) in self._values.items() if t < cutoff]:
                del self._values[k]
        self._values[key] = (time.monotonic(), value)
        return value

    def peek(self, key: Hashable) -> V | None:
        """The last value whatever its age (None if never fetched)."""
        hit = self._values.get(key)
        return hit[1] if hit is not None else None
