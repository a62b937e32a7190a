"""Follower side: one long-poll fetch loop per leader broker (ARCHITECTURE.md layer 3).

Each loop carries every partition this broker follows on that leader (like
Fluvio's one connection per SPU pair, seed 002), builds each partition's
request with ``FollowerState.build_fetch`` and feeds the answers to
``FollowerState.on_fetch_response``: append the leader's batch bytes
unchanged, truncate on ``diverging_epoch`` (KIP-101/KIP-320, seed 001 §6.6),
adopt the piggybacked HW capped at the LEO (§6.4). The plan is recomputed
when metadata changes (:meth:`ReplicaFetcher.replan`); a loop whose set of
partitions changed drops its parked fetch and starts over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
import orjson

from app.partition import PartitionReplica, now_ms
from app.replica.wire import CONTENT_TYPE, decode_answers
from app.storage import CorruptBatchError
from replication.core import NO_LEADER, FetchRequest, FollowerState
from replication.core import messages as M

if TYPE_CHECKING:
    from app.node import Node

log = logging.getLogger("tidelog.fetcher")

Key = tuple[str, int]


@dataclass(slots=True)
class _Loop:
    leader: int
    keys: frozenset[Key]
    task: asyncio.Task[None] | None = None
    replanned: asyncio.Event = field(default_factory=asyncio.Event)


def _consume_outcome(fut: asyncio.Future[httpx.Response]) -> None:
    """Retrieve a dropped fetch's outcome so asyncio does not log it as unretrieved."""
    if not fut.cancelled():
        fut.exception()


class ReplicaFetcher:
    """The follower fetch loops of one node, one per leader broker."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self._loops: dict[int, _Loop] = {}
        self.fetches_ok = 0
        self.fetches_failed = 0

    def replan(self) -> None:
        """Recompute which partitions to fetch from which leader; start/stop loops."""
        wanted: dict[int, set[Key]] = {}
        for key, r in self.node.partitions.items():
            fs = r.follower_state
            if fs is not None and fs.leader != NO_LEADER:
                wanted.setdefault(fs.leader, set()).add(key)
        for leader in list(self._loops):
            if leader not in wanted:
                self._stop(self._loops.pop(leader))
        for leader, keys in wanted.items():
            loop = self._loops.get(leader)
            if loop is None:
                loop = self._loops[leader] = _Loop(leader, frozenset(keys))
                loop.task = asyncio.get_running_loop().create_task(self._fetch_loop(loop))
            elif loop.keys != keys:
                loop.keys = frozenset(keys)
                loop.replanned.set()

    async def stop(self) -> None:
        loops, self._loops = list(self._loops.values()), {}
        for lp in loops:
            self._stop(lp)
        for lp in loops:
            if lp.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await lp.task

    @staticmethod
    def _stop(loop: _Loop) -> None:
        if loop.task is not None:
            loop.task.cancel()

    def _requests(
        self, loop: _Loop
    ) -> list[tuple[Key, PartitionReplica, FollowerState, FetchRequest]]:
        out = []
        for key in sorted(loop.keys):
            r = self.node.partitions.get(key)
            fs = r.follower_state if r is not None else None
            if r is None or fs is None or fs.leader != loop.leader:
                continue
            fs.broker_epoch = self.node.broker_epoch  # a re-registration renews it
            req = fs.build_fetch(r.log)
            if req is not None:
                out.append((key, r, fs, req))
        return out

    async def _fetch_loop(self, loop: _Loop) -> None:
        node = self.node
        s = node.settings
        backoff_s = s.replica_fetch_backoff_ms / 1000
        while True:
            loop.replanned.clear()
            reqs = self._requests(loop)
            broker = node.image.brokers.get(loop.leader)
            if not reqs or broker is None or node.broker_epoch < 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(loop.replanned.wait(), 1.0)
                continue
            body = orjson.dumps({
                "replica_id": s.node_id, "broker_epoch": node.broker_epoch,
                "max_wait_ms": s.replica_fetch_wait_ms, "max_bytes": s.replica_fetch_max_bytes,
                "partitions": [
                    {"topic": k[0], "partition": k[1], "fetch_offset": q.fetch_offset,
                     "last_fetched_epoch": q.last_fetched_epoch,
                     "current_leader_epoch": q.current_leader_epoch}
                    for k, _r, _fs, q in reqs
                ],
            })
            ok = await self._round(loop, broker.url, body, reqs)
            if ok:
                backoff_s = s.replica_fetch_backoff_ms / 1000
            else:
                self.fetches_failed += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(loop.replanned.wait(), backoff_s)
                backoff_s = min(backoff_s * 2, s.replica_fetch_backoff_ms_max / 1000)

    async def _round(
        self,
        loop: _Loop,
        url: str,
        body: bytes,
        reqs: list[tuple[Key, PartitionReplica, FollowerState, FetchRequest]],
    ) -> bool:
        """One fetch round trip; False when it failed (the caller backs off)."""
        node = self.node
        s = node.settings
        send = asyncio.ensure_future(node.peers.http.post(
            f"{url}/internal/v1/replica/fetch", content=body,
            headers={**node.peers.auth_headers(), "content-type": "application/json",
                     "accept": CONTENT_TYPE},
            timeout=s.replica_fetch_wait_ms / 1000 + s.replica_fetch_timeout_ms / 1000,
        ))
        replanned = asyncio.ensure_future(loop.replanned.wait())
        try:
            await asyncio.wait({send, replanned}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            replanned.cancel()
            if not send.done():
                # The partition set changed (refetch with the new one at once) or this
                # loop is being stopped: drop the parked fetch.
                send.cancel()
                send.add_done_callback(_consume_outcome)
        if not send.done() or send.cancelled():
            return True
        try:
            resp = send.result()
        except httpx.HTTPError as e:
            log.debug("fetch from broker %d failed: %r", loop.leader, e)
            return False
        if resp.status_code != 200:
            log.info("fetch from broker %d: HTTP %d %s", loop.leader, resp.status_code,
                     resp.content[:200])
            return False
        try:
            answers = {(a.topic, a.partition): a for a in decode_answers(resp.content)}
        except (ValueError, KeyError, TypeError) as e:
            log.warning("bad fetch answer from broker %d: %r", loop.leader, e)
            return False
        self.fetches_ok += 1
        t = now_ms()
        any_ok = False
        for key, r, fs, req in reqs:
            a = answers.get(key)
            if a is None or node.partitions.get(key) is not r or r.follower_state is not fs:
                continue  # the partition was dropped or changed role during the fetch
            resp_p = a.response
            if resp_p.error is None:
                any_ok = True
            elif (resp_p.error == M.OFFSET_OUT_OF_RANGE and resp_p.log_start_offset >= 0
                  and req.fetch_offset < resp_p.log_start_offset):
                # Behind the leader's retention: restart the log at its log start.
                r.log.truncate_fully_and_start_at(resp_p.log_start_offset)
                r.adopt_leader_hw()
                continue
            actions = fs.on_fetch_response(req, resp_p, r.log, t)
            try:
                node.replication.execute(r, actions, a.records)
            except (CorruptBatchError, ValueError) as e:
                log.warning("%s/%d: fetched batches refused: %s", key[0], key[1], e)
                continue
            if not actions:
                r.adopt_leader_hw()
        return any_ok
