"""Waiters for an offset threshold with a timeout (Kafka's "purgatory").

Long-poll fetches wait for the visible end of a partition to pass their
offset; acks=all produces wait for the HW to pass their last record. Both
register a threshold here and are woken when the watched value reaches it.
Waking is O(number of satisfied waiters): waiters sit in a heap by threshold.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools


class OffsetWaiters:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._dead = 0  # cancelled futures still in the heap
        self.value = 0

    def advance(self, value: int) -> None:
        """The watched value is now ``value``; wake everyone whose threshold it reached."""
        self.value = value
        heap = self._heap
        while heap and heap[0][0] <= value:
            _, _, fut = heapq.heappop(heap)
            if fut.cancelled():
                self._dead -= 1
            elif not fut.done():
                fut.set_result(None)

    def reset(self, value: int) -> None:
        """The value moved backwards (truncation): keep waiters, just track the new value."""
        self.value = value

    async def wait_for(self, threshold: int, timeout_s: float) -> bool:
        """Wait until the value reaches ``threshold``; False on timeout."""
        if self.value >= threshold:
            return True
        if timeout_s <= 0:
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (threshold, next(self._seq), fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return self.value >= threshold
        finally:
            if not fut.done():
                fut.cancel()
            if fut.cancelled():
                self._dead += 1
                if self._dead > 64 and 2 * self._dead > len(self._heap):
                    # Timed-out waiters stay in the heap until reached; drop them in bulk.
                    self._heap = [e for e in self._heap if not e[2].cancelled()]
                    heapq.heapify(self._heap)
                    self._dead = 0

    def fail_all(self, exc: BaseException) -> None:
        """Wake every waiter with ``exc`` (partition deleted or leadership lost)."""
        for _, _, fut in self._heap:
            if not fut.done():
                fut.set_exception(exc)
        self._heap.clear()
        self._dead = 0
