"""A seeded discrete-event scheduler and a faulty network (no wall clock, no threads)."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CONTROLLER = 0
"""Node id of the (single logical) controller; brokers are 1..N, clients 100+."""


class Scheduler:
    """Events ordered by (time, insertion order); ``now_ms`` only moves forward."""

    def __init__(self) -> None:
        self.now_ms = 0
        self._queue: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0

    def at(self, t_ms: int, fn: Callable[..., None], *args: Any) -> None:
        assert t_ms >= self.now_ms, "events are never scheduled in the past"
        heapq.heappush(self._queue, (t_ms, self._seq, fn, args))
        self._seq += 1

    def after(self, delay_ms: int, fn: Callable[..., None], *args: Any) -> None:
        self.at(self.now_ms + delay_ms, fn, *args)

    def run_until(self, t_ms: int, after_step: Callable[[], None]) -> int:
        """Run every event due by ``t_ms``, calling ``after_step`` after each; returns the count."""
        n = 0
        q = self._queue
        while q and q[0][0] <= t_ms:
            t, _, fn, args = heapq.heappop(q)
            self.now_ms = t
            fn(*args)
            after_step()
            n += 1
        self.now_ms = t_ms
        return n


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """Delays in ms; probabilities per message."""

    delay_min_ms: int = 1
    delay_max_ms: int = 8
    spike_p: float = 0.03
    spike_max_ms: int = 150
    long_delay_p: float = 0.02
    long_delay_max_ms: int = 1_500
    drop_p: float = 0.01
    duplicate_p: float = 0.02


class Network:
    """Messages between nodes with delay, reordering (random delay), drop,
    duplication, and directed cuts (a cut ``(a, b)`` blocks a → b only, so
    asymmetric partitions are one cut; a full partition is both directions).

    A message is bound to the incarnations of both ends when sent, like a
    request on a TCP connection: if either end restarts before delivery it is lost.
    """

    def __init__(self, sched: Scheduler, rng: random.Random, cfg: NetworkConfig) -> None:
        self.sched = sched
        self.rng = rng
        self.cfg = cfg
        self.cuts: dict[tuple[int, int], int] = {}  # (src, dst) -> number of active cuts
        self.slow: dict[tuple[int, int], int] = {}  # (src, dst) -> extra delay in ms
        self.handlers: dict[int, Callable[[int, Any], None]] = {}
        self.incarnation: dict[int, int] = {}
        self.sent = 0
        self.delivered = 0

    def attach(self, node: int, incarnation: int, handler: Callable[[int, Any], None]) -> None:
        self.handlers[node] = handler
        self.incarnation[node] = incarnation

    def detach(self, node: int) -> None:
        self.handlers.pop(node, None)
        self.incarnation[node] = self.incarnation.get(node, 0) + 1_000_000

    def cut(self, src: int, dst: int) -> None:
        self.cuts[(src, dst)] = self.cuts.get((src, dst), 0) + 1

    def heal(self, src: int, dst: int) -> None:
        n = self.cuts.get((src, dst), 0) - 1
        if n <= 0:
            self.cuts.pop((src, dst), None)
        else:
            self.cuts[(src, dst)] = n

    def set_slow(self, src: int, dst: int, extra_ms: int) -> None:
        """Add ``extra_ms`` to every message on the directed link (0 restores it)."""
        if extra_ms:
            self.slow[(src, dst)] = extra_ms
        else:
            self.slow.pop((src, dst), None)

    def send(self, src: int, dst: int, msg: Any) -> None:
        self.sent += 1
        rng, cfg = self.rng, self.cfg
        if (src, dst) in self.cuts or rng.random() < cfg.drop_p:
            return
        copies = 2 if rng.random() < cfg.duplicate_p else 1
        tag = (self.incarnation.get(src, 0), self.incarnation.get(dst, 0))
        extra = self.slow.get((src, dst), 0)
        for _ in range(copies):
            delay = extra + rng.randint(cfg.delay_min_ms, cfg.delay_max_ms)
            r = rng.random()
            if r < cfg.spike_p:
                delay += rng.randint(1, cfg.spike_max_ms)
            elif r < cfg.spike_p + cfg.long_delay_p:
                delay += rng.randint(cfg.spike_max_ms, cfg.long_delay_max_ms)
            self.sched.after(delay, self._deliver, src, dst, tag, msg)

    def _deliver(self, src: int, dst: int, tag: tuple[int, int], msg: Any) -> None:
        if (src, dst) in self.cuts:
            return
        if tag != (self.incarnation.get(src, 0), self.incarnation.get(dst, 0)):
            return
        handler = self.handlers.get(dst)
        if handler is not None:
            self.delivered += 1
            handler(src, msg)
