"""Deterministic message-level harness: several patched raftos nodes in one process.

Ported from the evaluation's shared/raftos/repro/r07_safety_sim.py: a fake transport
queues every message; the test decides what is delivered, delayed, dropped or duplicated.
Timers are pushed out of the way (a 1000 s heartbeat), so nothing happens on its own.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import raftos
from raftos import state as rs

from replication.controller.raft import patches
from replication.controller.raft.codec import JsonWireSerializer
from replication.controller.raft.protocol import RUNTIME

Message = tuple[int, int, dict[str, Any]]


def rid(port: int) -> str:
    return f"127.0.0.1:{port}"


class FakeServer:
    """What raftos's ``State`` needs from ``server.Node``: address, peers, send."""

    def __init__(self, net: SimNet, port: int) -> None:
        self.net, self.host, self.port = net, "127.0.0.1", port
        self.loop = asyncio.get_running_loop()
        self.cluster = {("127.0.0.1", p) for p in net.ports if p != port}
        raftos.configure({"log_path": str(net.root / f"n{port}")})
        self.state = rs.State(self)

    @property
    def cluster_count(self) -> int:
        return len(self.cluster)

    async def send(self, data: dict[str, Any], destination: Any) -> None:
        if isinstance(destination, str):
            destination = ("127.0.0.1", int(destination.rsplit(":", 1)[1]))
        # round-trip through the wire serializer, as UDP would
        wire = JsonWireSerializer.unpack(JsonWireSerializer.pack(data))
        self.net.outbox.append((self.port, destination[1], wire))

    def broadcast(self, data: dict[str, Any]) -> None:
        for _, port in self.cluster:
            self.net.outbox.append((self.port, port, dict(data)))


class SimNet:
    def __init__(self, root: Path, ports: list[int], max_log_entries: int | None = None) -> None:
        patches.install()
        raftos.configure({"serializer": JsonWireSerializer, "heartbeat_interval": 1000})
        RUNTIME.__init__()  # type: ignore[misc]
        RUNTIME.max_log_entries = max_log_entries
        self.root = root
        self.ports = ports
        self.outbox: list[Message] = []
        self.nodes: dict[int, FakeServer] = {}
        for p in ports:
            self.nodes[p] = FakeServer(self, p)
            self.nodes[p].state.start()

    # -- inspection --------------------------------------------------------------------------
    def st(self, p: int) -> Any:
        return self.nodes[p].state

    def role(self, p: int) -> str:
        return type(self.st(p).state).__name__

    def is_leader(self, p: int) -> bool:
        return isinstance(self.st(p).state, rs.Leader)

    def log(self, p: int) -> list[tuple[int, Any]]:
        return [(e["term"], e["command"]) for e in self.st(p).log.cache]

    def commands(self, p: int) -> list[Any]:
        return [c for _, c in self.log(p) if c.get("op") != "noop"]

    def pending(self, src: int, dst: int, type_: str) -> list[Message]:
        return [m for m in self.outbox if m[0] == src and m[1] == dst and m[2]["type"] == type_]

    # -- delivery ------------------------------------------------------------------------------
    def take(self, src: int, dst: int, type_: str) -> Message:
        for i, m in enumerate(self.outbox):
            if m[0] == src and m[1] == dst and m[2]["type"] == type_:
                return self.outbox.pop(i)
        raise LookupError(f"no {type_} {src}->{dst} in flight")

    def deliver(self, m: Message) -> None:
        src, dst, data = m
        if dst in self.nodes:
            self.nodes[dst].state.request_handler(dict(data, sender=("127.0.0.1", src)))

    async def pump(self, src: int, dst: int, type_: str) -> None:
        self.deliver(self.take(src, dst, type_))
        await flush()

    async def step(self, allowed: set[int]) -> int:
        """Deliver one round of what is in flight between ``allowed`` nodes."""
        await flush()
        ms = [m for m in self.outbox if m[0] in allowed and m[1] in allowed]
        for m in ms:
            self.outbox.remove(m)
            self.deliver(m)
        await flush()
        return len(ms)

    async def settle(self, allowed: set[int], rounds: int = 500) -> int:
        """Deliver everything in flight between ``allowed`` nodes until quiet; others are
        partitioned (their messages stay queued). Returns messages delivered."""
        delivered = 0
        for _ in range(rounds):
            await flush()
            ms = [m for m in self.outbox if m[0] in allowed and m[1] in allowed]
            if not ms:
                return delivered
            for m in ms:
                self.outbox.remove(m)
                self.deliver(m)
                delivered += 1
        raise AssertionError(f"network did not settle in {rounds} rounds")

    async def elect(self, p: int, voters: set[int]) -> None:
        """Make ``p`` a candidate and deliver its vote traffic with ``voters`` only."""
        self.st(p).to_candidate()
        await flush()
        for v in voters:
            await self.pump(p, v, "request_vote")
        for v in voters:
            for m in self.pending(v, p, "request_vote_response"):
                self.outbox.remove(m)
                self.deliver(m)
        await flush()

    def age_inflight(self, leader: int, seconds: float) -> None:
        """Pretend ``seconds`` passed since the leader's outstanding messages were sent
        (the simulated clock does not move; retransmission is due after a heartbeat)."""
        inflight = self.st(leader).state.inflight
        for follower in inflight:
            inflight[follower] -= seconds

    def restart(self, p: int) -> None:
        """Crash ``p`` (its unsent messages are lost) and start it from its files."""
        self.st(p).stop()
        self.outbox = [m for m in self.outbox if m[0] != p]
        self.nodes[p] = FakeServer(self, p)
        self.nodes[p].state.start()

    def crash(self, p: int) -> None:
        self.st(p).stop()
        self.outbox = [m for m in self.outbox if m[0] != p and m[1] != p]
        del self.nodes[p]

    def stop(self) -> None:
        for n in self.nodes.values():
            n.state.stop()


async def flush() -> None:
    for _ in range(10):
        await asyncio.sleep(0)
