"""Runs the delivery workers this broker owes, and commits their cursors.

Exactly one broker delivers a partition of a subscription: the partition's
leader. After every metadata change this node has applied (roles follow the
metadata), the manager compares what it runs with what it should run: one
worker per (subscription, partition) whose partition it leads, subscription
not paused. A worker whose leadership, leader epoch or configuration changed
is stopped and its final state committed *before* a replacement starts, so
a restarted worker resumes from its own last position, not an older one.

Cursor commits are raft round-trips (``put_entities``), so they are batched
over every worker of this node and throttled to one per
``webhook_cursor_commit_ms``; idle workers commit nothing. That interval is
the at-least-once window: after a crash, the new leader redelivers what was
delivered after the last commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from app.partition import PartitionReplica, now_ms
from app.subscriptions.metrics import SubscriptionCollector
from app.subscriptions.model import (
    STATE,
    SUBSCRIPTION,
    PartitionState,
    partitions_of,
    state_name,
)
from app.subscriptions.sender import Sender
from app.subscriptions.ssrf import TargetPolicy, parse_hosts, parse_networks
from app.subscriptions.worker import PartitionWorker
from app.tasks import cancel_and_wait

if TYPE_CHECKING:
    from app.node import Node

log = logging.getLogger("tidelog.subscriptions")

COMMIT_CHUNK = 64
"""Entities per put_entities call (keeps one raft entry well below its size bound)."""
RECHECK_S = 1.0
"""Reconcile at least this often, so a worker that crashed is restarted."""
STOP_COMMIT_TIMEOUT_S = 5.0

Key = tuple[str, int]


@dataclass(slots=True)
class Running:
    worker: PartitionWorker
    task: asyncio.Task[None]
    cfg: dict[str, Any]
    replica: PartitionReplica
    leader_epoch: int


class SubscriptionManager:
    def __init__(self, node: Node) -> None:
        self.node = node
        s = node.settings
        self.policy = TargetPolicy(
            parse_networks(s.webhook_allowed_networks), parse_hosts(s.webhook_allowed_hosts)
        )
        self.sender: Sender | None = None
        self.running: dict[Key, Running] = {}
        self._dirty: dict[Key, PartitionState] = {}
        self._commit_lock = asyncio.Lock()
        self._reconcile_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        node.metrics.registry.register(SubscriptionCollector(self))

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        self.sender = Sender(self.policy)
        self._tasks = [
            asyncio.create_task(self._reconcile_loop()),
            asyncio.create_task(self._commit_loop()),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        await self._stop_workers(list(self.running))
        if self.sender is not None:
            await self.sender.close()

    # ---- reconciling workers with leadership and configuration ---------------------------
    async def _reconcile_loop(self) -> None:
        seen = -1
        while True:
            await self.node.wait_reconciled(seen + 1, RECHECK_S)
            seen = self.node.reconciled_version
            try:
                await self.reconcile()
            except Exception:  # keep reconciling; a bug here must not stop all delivery
                log.exception("reconciling subscriptions failed")

    def wanted(self) -> dict[Key, tuple[dict[str, Any], PartitionReplica]]:
        """(subscription, partition) → (config, local leader replica) this node must deliver."""
        image = self.node.image
        out: dict[Key, tuple[dict[str, Any], PartitionReplica]] = {}
        for sid, cfg in image.entities_of(SUBSCRIPTION).items():
            topic = image.topics.get(str(cfg.get("topic")))
            if cfg.get("paused") or topic is None:
                continue
            for p in partitions_of(cfg, len(topic.partitions)):
                r = self.node.partitions.get((topic.name, p))
                if r is not None and r.is_leader and r.topic_id == topic.topic_id:
                    out[(sid, p)] = (cfg, r)
        return out

    async def reconcile(self) -> None:
        """Start and stop workers to match the image; safe to call from a request too."""
        async with self._reconcile_lock:
            await self._reconcile()

    async def _reconcile(self) -> None:
        want = self.wanted()
        stale = [
            k for k, run in self.running.items()
            if k not in want or run.task.done() or want[k][0] != run.cfg or want[k][1] is not run.replica
            or run.replica.meta.leader_epoch != run.leader_epoch
        ]
        if stale:
            await self._stop_workers(stale)
        for key, (cfg, replica) in want.items():
            if key not in self.running:
                self._start_worker(key, cfg, replica)

    def _start_worker(self, key: Key, cfg: dict[str, Any], replica: PartitionReplica) -> None:
        assert self.sender is not None
        sid, p = key
        self._dirty.pop(key, None)  # the committed state (read next) supersedes an unsent one
        value = self.node.image.entity(STATE, state_name(sid, p))
        if value is not None and value.get("uid") == cfg["uid"]:
            state = PartitionState.from_value(value)
        else:
            state = PartitionState(topic=replica.topic, subscription=sid, uid=cfg["uid"], partition=p)
        state.leader_epoch = replica.meta.leader_epoch
        worker = PartitionWorker(
            sub_id=sid, cfg=cfg, replica=replica, leader_epoch=replica.meta.leader_epoch, state=state,
            sender=self.sender, mark_dirty=self._mark_dirty, commit_now=self._commit_now,
            dead_letter=self._write_dead_letters,
        )
        task = asyncio.create_task(worker.run(), name=f"subscription {sid} {replica.topic}/{p}")
        self.running[key] = Running(worker, task, cfg, replica, replica.meta.leader_epoch)

    async def _stop_workers(self, keys: list[Key]) -> None:
        """Cancel, then commit their final states in one go (a leader losing many partitions
        pays one raft round-trip, not one each)."""
        runs = [self.running.pop(k) for k in keys]
        for run in runs:
            run.task.cancel()
        for run in runs:
            with contextlib.suppress(asyncio.CancelledError):
                try:
                    await run.task
                except Exception:
                    log.exception("subscription worker %s failed", run.task.get_name())
            self._dirty[(run.worker.sub_id, run.worker.replica.partition)] = run.worker.state
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.flush(), STOP_COMMIT_TIMEOUT_S)

    # ---- cursor commits --------------------------------------------------------------------
    def _mark_dirty(self, state: PartitionState) -> None:
        self._dirty[(state.subscription, state.partition)] = state

    async def _commit_now(self, state: PartitionState) -> None:
        self._mark_dirty(state)
        await self.flush()

    async def _commit_loop(self) -> None:
        while True:
            await asyncio.sleep(self.node.settings.webhook_cursor_commit_ms / 1000)
            try:
                await self.flush()
            except Exception as e:  # the controller may be failing over: the next round retries
                log.info("committing subscription cursors failed: %s", e)

    async def flush(self) -> None:
        """Commit every changed state; on failure they stay pending for the next round."""
        async with self._commit_lock:
            if not self._dirty:
                return
            pending, self._dirty = self._dirty, {}
            image = self.node.image
            t = now_ms()
            items: list[tuple[Key, PartitionState, dict[str, Any]]] = []
            for key, st in pending.items():
                cfg = image.entity(SUBSCRIPTION, st.subscription)
                if cfg is None or cfg.get("uid") != st.uid:
                    continue  # deleted (or re-created) meanwhile: its state must not come back
                current = image.entity(STATE, state_name(*key))
                if current is not None and int(current.get("leader_epoch", -1)) > st.leader_epoch:
                    continue  # a newer leader already committed: a deposed one must not roll it back
                st.leader = self.node.settings.node_id
                st.updated_ms = t
                items.append((key, st, {"kind": STATE, "name": state_name(*key), "value": st.to_value()}))
            for i in range(0, len(items), COMMIT_CHUNK):
                chunk = items[i : i + COMMIT_CHUNK]
                try:
                    await self.node.controller_call("put_entities", {"entities": [e for _, _, e in chunk]})
                except BaseException:
                    for key, st, _ in items[i:]:
                        self._dirty.setdefault(key, st)
                    raise

    # ---- dead letters ----------------------------------------------------------------------
    async def _write_dead_letters(self, topic: str, records: list[dict[str, Any]]) -> None:
        """Produce through the public API of the DLQ partition's leader (acks=all), like any
        client: the DLQ may be led by another broker."""
        image = self.node.image
        meta = image.partition(topic, 0)
        if meta is None:
            raise RuntimeError(f"dead-letter topic {topic!r} does not exist")
        broker = image.brokers.get(meta.leader)
        url = broker.url if broker is not None else self.node.settings.url
        resp = await self.node.peers.http.post(
            f"{url}/v1/topics/{topic}/partitions/0/records", params={"acks": "all", "timeout_ms": 10_000},
            content=orjson.dumps({"records": records}), headers={"content-type": "application/json"},
            timeout=30,
        )
        if resp.status_code != 200:
            raise RuntimeError(f"HTTP {resp.status_code}: {resp.text[:200]}")

    # ---- status ----------------------------------------------------------------------------
    def status(self, sid: str, cfg: dict[str, Any]) -> dict[str, Any]:
        """Per-partition delivery status: live for partitions delivered here, else as of
        the delivering broker's last cursor commit (``updated_ms``)."""
        image = self.node.image
        topic = image.topics.get(str(cfg.get("topic")))
        parts: list[dict[str, Any]] = []
        for p in partitions_of(cfg, len(topic.partitions)) if topic is not None else []:
            run = self.running.get((sid, p))
            live = run is not None and run.cfg.get("uid") == cfg.get("uid")
            value = image.entity(STATE, state_name(sid, p))
            committed = (
                PartitionState.from_value(value) if value is not None and value.get("uid") == cfg.get("uid")
                else PartitionState(topic=str(cfg["topic"]), subscription=sid, uid=str(cfg["uid"]), partition=p)
            )
            if run is not None and live:
                st = run.worker.state
                hw = run.replica.high_watermark
            else:
                st = committed
                hw = st.high_watermark
            meta = image.partition(str(cfg["topic"]), p)
            parts.append({
                "partition": p,
                "leader": meta.leader if meta is not None else None,
                "delivering_here": live,
                "cursor": st.cursor,
                "committed_cursor": committed.cursor,
                "high_watermark": hw,
                "lag": max(0, hw - st.cursor) if st.cursor >= 0 and hw >= 0 else None,
                "delivered": st.delivered,
                "dead_lettered": st.dead_lettered,
                "skipped": st.skipped,
                "requests": st.requests,
                "failures": st.failures,
                "attempts": st.attempts,
                "last_success_ms": st.last_success_ms,
                "last_error": st.last_error,
                "last_error_ms": st.last_error_ms,
                "updated_ms": st.updated_ms or None,
            })
        lags = [x["lag"] for x in parts if x["lag"] is not None]
        successes = [x["last_success_ms"] for x in parts if x["last_success_ms"] is not None]
        errors = [x for x in parts if x["last_error_ms"] is not None]
        last_err = max(errors, key=lambda x: x["last_error_ms"]) if errors else None
        failing = any(x["attempts"] > 0 for x in parts)
        return {
            "state": "paused" if cfg.get("paused") else "failing" if failing else "active",
            "lag": sum(lags),
            "delivered": sum(x["delivered"] for x in parts),
            "dead_lettered": sum(x["dead_lettered"] for x in parts),
            "skipped": sum(x["skipped"] for x in parts),
            "attempts": max((x["attempts"] for x in parts), default=0),
            "last_success_ms": max(successes) if successes else None,
            "last_error": last_err["last_error"] if last_err else None,
            "last_error_ms": last_err["last_error_ms"] if last_err else None,
            "partitions": parts,
        }
