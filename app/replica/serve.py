"""Leader side of the replica fetch: answer from the log, park long-polls, wake on append.

One request carries every partition a follower follows on this broker
(ARCHITECTURE.md layer 3; Fluvio's one connection per SPU pair, seed 002).
Each partition goes through ``LeaderState.handle_fetch`` (fencing, KIP-320
divergence, follower progress, HW, ISR expansion; seed 001 §6.5, §6.6). The
request is parked until some partition has data past its fetch offset or an
error, its role changed, or ``max_wait_ms`` passed; the HW rides on every
answer. Batch bytes are shipped as stored, never decoded.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.partition import INLINE_READ_BYTES, PartitionReplica, now_ms
from app.replica.wire import PartitionAnswer, encode_answers
from app.storage import OffsetOutOfRange
from replication.core import FetchRequest, FetchResponse
from replication.core import messages as M

if TYPE_CHECKING:
    from app.node import Node

MAX_WAIT_MS = 30_000


@dataclass(slots=True)
class _Item:
    topic: str
    partition: int
    req: FetchRequest
    replica: PartitionReplica | None
    resp: FetchResponse

    def ready(self) -> bool:
        """Answer now: an error, a divergence, records, or a role change."""
        r, resp = self.replica, self.resp
        if resp.error is not None or resp.diverging_epoch is not None or resp.records_available:
            return True
        if r is None:
            return True
        ls = r.leader_state
        if ls is None or ls.leader_epoch != self.req.current_leader_epoch:
            return True
        # A moved HW alone does not wake the fetch: it rides on the next answer (data
        # or the long-poll timeout). Waking on it costs every follower an extra round
        # trip per commit, which on a small machine doubles the latency of acks=all.
        return r.log.log_end_offset > self.req.fetch_offset


def _error(req: FetchRequest, code: str, leader_epoch: int = -1) -> FetchResponse:
    return FetchResponse(req.fetch_offset, -1, leader_epoch, -1, error=code)


def _not_leader(req: FetchRequest, replica: PartitionReplica | None) -> FetchResponse:
    """A non-leader's answer: a newer epoch it has not learned yet, or simply not the leader."""
    if replica is not None and req.current_leader_epoch > replica.meta.leader_epoch:
        return _error(req, M.UNKNOWN_LEADER_EPOCH, replica.meta.leader_epoch)
    if replica is not None and req.current_leader_epoch < replica.meta.leader_epoch:
        return _error(req, M.FENCED_LEADER_EPOCH, replica.meta.leader_epoch)
    return _error(req, M.NOT_LEADER)


@dataclass(frozen=True, slots=True)
class ReplicaFetch:
    """A parsed replica fetch request (JSON body; see ``app.replica.wire``)."""

    max_wait_ms: int
    max_bytes: int
    partitions: list[tuple[str, int, FetchRequest]]


def parse_replica_fetch(body: Any) -> ReplicaFetch:
    """Validate a request body; KeyError/TypeError/ValueError when malformed."""
    if not isinstance(body, dict) or not isinstance(body.get("partitions"), list):
        raise TypeError("body must be an object with a partitions list")
    replica_id = int(body["replica_id"])
    broker_epoch = int(body["broker_epoch"])
    parts = [
        (str(p["topic"]), int(p["partition"]), FetchRequest(
            fetch_offset=int(p["fetch_offset"]),
            last_fetched_epoch=int(p["last_fetched_epoch"]),
            current_leader_epoch=int(p["current_leader_epoch"]),
            broker_epoch=broker_epoch,
            replica_id=replica_id,
        ))
        for p in body["partitions"]
    ]
    return ReplicaFetch(
        min(max(int(body.get("max_wait_ms", 0)), 0), MAX_WAIT_MS),
        max(int(body.get("max_bytes", 1 << 20)), 1),
        parts,
    )


async def serve_replica_fetch(node: Node, body: dict[str, Any] | ReplicaFetch) -> bytes:
    """Answer one follower's multi-partition fetch (see ``app.replica.wire`` for the body)."""
    f = body if isinstance(body, ReplicaFetch) else parse_replica_fetch(body)
    budget = min(f.max_bytes, node.settings.max_fetch_bytes)
    t = now_ms()
    items: list[_Item] = []
    for topic, partition, req in f.partitions:
        replica = node.partitions.get((topic, partition))
        ls = replica.leader_state if replica is not None else None
        if replica is None or ls is None:
            resp = _not_leader(req, replica)
        else:
            resp, actions = ls.handle_fetch(req, replica.log, t)
            node.replication.execute(replica, actions)
        items.append(_Item(topic, partition, req, replica, resp))
    if f.max_wait_ms > 0 and not any(i.ready() for i in items):
        await _park(items, f.max_wait_ms)
    return encode_answers(await _answers(items, budget))


async def _park(items: list[_Item], max_wait_ms: int) -> None:
    """Wait until any item is ready or ``max_wait_ms`` passed (Kafka's fetch purgatory)."""
    ev = asyncio.Event()
    replicas = {id(i.replica): i.replica for i in items if i.replica is not None}
    for r in replicas.values():
        r.fetch_watchers.add(ev)
    deadline = time.monotonic() + max_wait_ms / 1000
    try:
        while not any(i.ready() for i in items):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            ev.clear()
            try:
                await asyncio.wait_for(ev.wait(), left)
            except TimeoutError:
                return
    finally:
        for r in replicas.values():
            r.fetch_watchers.discard(ev)


async def _answers(items: list[_Item], budget: int) -> list[PartitionAnswer]:
    out: list[PartitionAnswer] = []
    for i in items:
        resp, r = i.resp, i.replica
        if resp.error is not None or resp.diverging_epoch is not None or r is None:
            out.append(PartitionAnswer(i.topic, i.partition, resp, b""))
            continue
        ls = r.leader_state
        if ls is None or ls.leader_epoch != i.req.current_leader_epoch:
            # Deposed (or re-elected) while the fetch was parked.
            out.append(PartitionAnswer(i.topic, i.partition, _not_leader(i.req, r), b""))
            continue
        data: bytes = b""
        leo = r.log.log_end_offset
        if i.req.fetch_offset < leo and budget > 0:
            try:
                # Small reads (the usual caught-up follower) run inline; a large
                # catch-up read goes to a worker thread so the event loop keeps serving.
                estimate = (leo - i.req.fetch_offset) * r.avg_record_bytes
                if min(budget, estimate) <= INLINE_READ_BYTES:
                    data = r.log.read(i.req.fetch_offset, budget, leo)
                else:
                    data = await asyncio.to_thread(r.log.read, i.req.fetch_offset, budget, leo)
            except OffsetOutOfRange:
                err = _error(i.req, M.OFFSET_OUT_OF_RANGE, ls.leader_epoch)
                out.append(PartitionAnswer(i.topic, i.partition, err, b""))
                continue
            budget -= len(data)
        fresh = FetchResponse(
            fetch_offset=i.req.fetch_offset, hw=ls.high_watermark, leader_epoch=ls.leader_epoch,
            log_start_offset=r.log.log_start_offset, records_available=bool(data),
        )
        out.append(PartitionAnswer(i.topic, i.partition, fresh, data))
    return out
