"""Per-partition sparkline history, sampled by the node itself (no Prometheus needed).

Every ``step_ms`` one pass over the partitions this broker leads records LEO,
HW and the largest follower lag into fixed-size rings (``capacity`` samples,
10 minutes at 1 s). It is built for thousands of partitions:

* one pass, no task per partition, a handful of attribute reads each;
* a partition whose values never changed has no ring at all: its history is
  "flat at the current value", so an idle broker costs one small tuple per
  partition; a ring (three ``array('q')``, 14 KB at 600 samples) is allocated
  on the first change and kept while the broker leads the partition;
* a broker that stops leading a partition drops its ring (the new leader
  samples from then on).
"""

from __future__ import annotations

import asyncio
import logging
import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.partition import PartitionReplica
from app.tasks import cancel_and_wait

log = logging.getLogger("tidelog.dashboard")

Key = tuple[str, int]


def max_follower_lag(replica: PartitionReplica) -> int:
    """Records the furthest-behind assigned follower lags the leader's LEO; 0 if none, -1 if not led."""
    ls = replica.leader_state
    if ls is None:
        return -1
    leo = ls.log_end_offset
    worst = 0
    for b in ls.assignment:
        if b == ls.local_broker:
            continue
        p = ls.replicas.get(b)
        lag = leo - (p.log_end_offset if p is not None else 0)
        if lag > worst:
            worst = lag
    return worst


class _Ring:
    __slots__ = ("hw", "lag", "leo")

    def __init__(self, capacity: int, leo: int, hw: int, lag: int) -> None:
        self.leo = array("q", [leo]) * capacity
        self.hw = array("q", [hw]) * capacity
        self.lag = array("q", [lag]) * capacity


@dataclass(slots=True)
class _Series:
    last: tuple[int, int, int]
    """(leo, hw, lag) at the latest sample."""
    ring: _Ring | None = None
    since_seq: int = 0
    """Sample number from which this broker has led (older slots are not its history)."""


class HistorySampler:
    """Ring-buffer sampler over the led partitions of ``partitions`` (the node's live dict)."""

    def __init__(
        self, partitions: dict[Key, PartitionReplica], step_ms: int = 1000, capacity: int = 600
    ) -> None:
        self.partitions = partitions
        self.step_ms = step_ms
        self.capacity = capacity
        self.seq = 0
        """Samples taken so far; slot of sample ``s`` is ``s % capacity``."""
        self.times = array("q", [0]) * capacity
        self.series: dict[Key, _Series] = {}
        self.last_pass_us = 0
        self.max_pass_us = 0
        self._task: asyncio.Task[None] | None = None

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._sample_loop())

    async def stop(self) -> None:
        await cancel_and_wait([self._task])

    async def _sample_loop(self) -> None:
        step = self.step_ms / 1000
        while True:
            # Aligned to the wall clock, so every broker's samples share timestamps.
            await asyncio.sleep(step - (time.time() % step))
            try:
                self.sample(time.time_ns() // 1_000_000)
            except Exception:  # a sampling bug must not stop the node's other work
                log.exception("history sample failed")

    # ---- sampling ------------------------------------------------------------------------
    def sample(self, now_ms: int) -> None:
        """One pass: append a sample for every led partition (call once per ``step_ms``)."""
        t0 = time.perf_counter_ns()
        seq = self.seq
        slot = seq % self.capacity
        self.times[slot] = now_ms
        series = self.series
        cap = self.capacity
        for key, r in self.partitions.items():
            ls = r.leader_state
            s = series.get(key)
            if ls is None:
                if s is not None:
                    del series[key]
                continue
            vals = (ls.log_end_offset, ls.high_watermark, max_follower_lag(r))
            if s is None:
                series[key] = _Series(vals, None, seq)
                continue
            ring = s.ring
            if ring is None:
                if vals == s.last:
                    continue
                leo, hw, lag = s.last
                ring = s.ring = _Ring(cap, leo, hw, lag)
            ring.leo[slot], ring.hw[slot], ring.lag[slot] = vals
            s.last = vals
        if len(series) > len(self.partitions):  # deleted topics
            for key in [k for k in series if k not in self.partitions]:
                del series[key]
        self.seq = seq + 1
        self.last_pass_us = (time.perf_counter_ns() - t0) // 1000
        self.max_pass_us = max(self.max_pass_us, self.last_pass_us)

    # ---- reading -------------------------------------------------------------------------
    def rate(self, key: Key, window: int = 5) -> float | None:
        """Records/s appended over the last ``window`` samples; None when not sampled here."""
        s = self.series.get(key)
        if s is None:
            return None
        if s.ring is None:
            return 0.0
        n = min(window, self.seq - s.since_seq - 1, self.capacity - 1)
        if n <= 0:
            return 0.0
        new, old = (self.seq - 1) % self.capacity, (self.seq - 1 - n) % self.capacity
        dt_ms = self.times[new] - self.times[old]
        return (s.ring.leo[new] - s.ring.leo[old]) * 1000 / dt_ms if dt_ms > 0 else 0.0

    def history(self, key: Key, points: int | None = None) -> dict[str, Any] | None:
        """Oldest-first samples since this broker leads ``key``: times, LEO, HW, lag and
        records/s (per sample interval); None when this broker does not lead it."""
        s = self.series.get(key)
        if s is None:
            return None
        n = min(self.seq - s.since_seq, self.capacity)
        if points is not None:
            n = min(n, points)
        idx = [(self.seq - n + i) % self.capacity for i in range(n)]
        times = [self.times[i] for i in idx]
        if s.ring is None:
            leo_v, hw_v, lag_v = s.last
            leo, hw, lag = [leo_v] * n, [hw_v] * n, [lag_v] * n
        else:
            leo = [s.ring.leo[i] for i in idx]
            hw = [s.ring.hw[i] for i in idx]
            lag = [s.ring.lag[i] for i in idx]
        rate = [0.0] + [
            (leo[i] - leo[i - 1]) * 1000 / (times[i] - times[i - 1]) if times[i] > times[i - 1] else 0.0
            for i in range(1, n)
        ]
        return {"step_ms": self.step_ms, "time_ms": times, "log_end_offset": leo,
                "high_watermark": hw, "max_lag": lag, "records_per_s": [round(x, 1) for x in rate]}

    def stats(self) -> dict[str, Any]:
        rings = sum(1 for s in self.series.values() if s.ring is not None)
        return {"step_ms": self.step_ms, "capacity": self.capacity, "samples": self.seq,
                "partitions": len(self.series), "rings": rings,
                "last_pass_us": self.last_pass_us, "max_pass_us": self.max_pass_us}

    def keys(self) -> Iterable[Key]:
        return self.series.keys()
