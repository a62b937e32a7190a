"""Producers and consumers of the simulated cluster.

Clients read metadata straight from the controller's image (a perfect but
possibly momentarily stale view: the leader may not have taken up its role
yet) and sometimes ask a random broker instead, which exercises NOT_LEADER
answers and deposed leaders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replication.controller.image import NO_LEADER
from tests.sim.messages import Consume, ConsumeReply, Produce, ProduceReply

if TYPE_CHECKING:
    from tests.sim.world import World

Key = tuple[str, int]


class Producer:
    """Sends one record at a time at random intervals, acks chosen per record."""

    def __init__(self, world: World, node: int) -> None:
        self.world = world
        self.node = node
        self.corr = 0
        self.sent: dict[int, tuple[Key, int, str]] = {}
        self.acked = 0
        self.errors = 0

    def start(self) -> None:
        self.world.net.attach(self.node, 0, self.on_message)
        self.world.sched.after(self.world.rng.randint(1, 10), self._loop)

    def _loop(self) -> None:
        w = self.world
        if w.now_ms < w.produce_until_ms:
            key = w.rng.choice(w.keys)
            acks = w.rng.choices(("none", "leader", "all"), weights=(1, 1, 4))[0]
            record = w.next_record_id()
            self.corr += 1
            self.sent[self.corr] = (key, record, acks)
            w.net.send(self.node, w.pick_broker(key), Produce(self.corr, key, acks, record))
        w.sched.after(w.rng.randint(1, 2 * w.cfg.produce_interval_ms), self._loop)

    def on_message(self, src: int, msg: Any) -> None:
        assert isinstance(msg, ProduceReply)
        entry = self.sent.pop(msg.corr, None)
        if entry is None:
            return
        if msg.error is None:
            self.acked += 1
        else:
            self.errors += 1


class Consumer:
    """Reads every partition from the start, one request at a time, fencing by
    leader epoch like a KIP-320 consumer; reports what it reads to the checker."""

    def __init__(self, world: World, node: int) -> None:
        self.world = world
        self.node = node
        self.corr = 0
        self.position: dict[Key, int] = {k: 0 for k in world.keys}
        self.epoch: dict[Key, int] = {k: 0 for k in world.keys}
        self.outstanding: tuple[int, Key, int, int] | None = None
        self.read = 0

    def start(self) -> None:
        self.world.net.attach(self.node, 0, self.on_message)
        self.world.sched.after(self.world.rng.randint(1, 20), self._loop)

    def _loop(self) -> None:
        w = self.world
        if self.outstanding is not None and w.now_ms - self.outstanding[3] > 200:
            self.outstanding = None  # timed out; a late answer is ignored
        if self.outstanding is None:
            key = w.rng.choice(w.keys)
            p = w.controller.image.partition(*key)
            assert p is not None
            self.epoch[key] = max(self.epoch[key], p.leader_epoch)
            if p.leader != NO_LEADER:
                self.corr += 1
                self.outstanding = (self.corr, key, self.position[key], w.now_ms)
                msg = Consume(self.corr, key, self.position[key], self.epoch[key])
                w.net.send(self.node, w.pick_broker(key), msg)
        w.sched.after(w.rng.randint(1, 2 * w.cfg.consume_interval_ms), self._loop)

    def on_message(self, src: int, msg: Any) -> None:
        assert isinstance(msg, ConsumeReply)
        if self.outstanding is None or self.outstanding[0] != msg.corr:
            return
        _, key, offset, _ = self.outstanding
        self.outstanding = None
        if msg.error is not None:
            return
        self.epoch[key] = max(self.epoch[key], msg.leader_epoch)
        self.world.checker.on_consume(self.node, key, offset, list(msg.records), msg.hw)
        self.position[key] = offset + len(msg.records)
        self.read += len(msg.records)
