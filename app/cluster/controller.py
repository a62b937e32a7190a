"""The active controller: the metadata log's leader runs the controller state machine.

Every command goes through :meth:`ControllerService.handle`, whether it came
over HTTP from another broker or in-process from this node's own agent. It
runs one command at a time (seed 001 §6.3 rule 3), commits the resulting key
updates through the metadata log *before* the image changes (rule 2: a
zombie controller cannot act, its commit fails), then applies the records
and wakes brokers long-polling for metadata.

When this node gains leadership of the metadata log it commits a barrier,
rebuilds the image from the replicated key-value state and starts afresh
(sessions get a full timeout: brokers are not fenced for the failover gap).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from app.cluster.metadata_log import MetadataLog, NotLeaderError
from replication.controller import records as R
from replication.controller.commands import (
    AlterPartition,
    ConfirmLeadership,
    ControllerSettings,
    CreateTopic,
    LeaderSuspect,
    PutEntity,
)
from replication.controller.deltas import RecentRecords, delta_response
from replication.controller.errors import ControllerError
from replication.controller.image import MetadataImage, TopicConfig
from replication.controller.kv import image_from_kv, kv_updates, topic_sizes
from replication.controller.machine import ControllerMachine, Decision

log = logging.getLogger("tidelog.controller")

RECENT_RECORDS = 20_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class NotController(Exception):
    """This node is not the active controller; ``leader_id`` may say who is."""

    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the active controller (metadata leader: {leader_id})")
        self.leader_id = leader_id


class ControllerService:
    def __init__(self, mlog: MetadataLog, settings: ControllerSettings, tick_ms: int) -> None:
        self.mlog = mlog
        self.settings = settings
        self.tick_ms = tick_ms
        self.active = False
        self.image = MetadataImage()
        self.machine: ControllerMachine | None = None
        self.recent = RecentRecords(RECENT_RECORDS, 0)
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()
        self._tick_task: asyncio.Task[None] | None = None
        self._activation: asyncio.Task[None] | None = None
        self.activations = 0
        mlog.add_leader_listener(self._on_leader_change)

    # ---- leadership ----------------------------------------------------------------------
    def _on_leader_change(self, leader_id: int | None, is_leader: bool) -> None:
        if is_leader and not self.active and (self._activation is None or self._activation.done()):
            self._activation = asyncio.get_running_loop().create_task(self._activate())
        elif not is_leader and self.active:
            self._deactivate("lost metadata leadership")

    async def _activate(self) -> None:
        async with self._lock:
            try:
                await self.mlog.barrier()
            except Exception as e:  # leadership flapped; the next change retries
                log.warning("controller barrier failed: %s", e)
                return
            self.image = image_from_kv(self.mlog.state())
            self.machine = ControllerMachine(self.image, self.settings)
            self.machine.activate(now_ms())
            self.recent = RecentRecords(RECENT_RECORDS, self.image.version)
            self.active = True
            self.activations += 1
            if not self.image.cluster_id:
                await self._commit_locked(
                    Decision([R.ClusterRecord(cluster_id=uuid.uuid4().hex)])
                )
            self._tick_task = asyncio.get_running_loop().create_task(self._tick_loop())
            log.info("active controller at metadata version %d", self.image.version)
            self._wake()

    async def _reactivate(self) -> None:
        await asyncio.sleep(self.tick_ms / 1000)
        if self.mlog.is_leader and not self.active:
            await self._activate()

    def _deactivate(self, why: str) -> None:
        log.info("controller inactive: %s", why)
        self.active = False
        self.machine = None
        if self._tick_task is not None:
            self._tick_task.cancel()
            self._tick_task = None
        self._wake()

    async def stop(self) -> None:
        if self._activation is not None:
            self._activation.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._activation
        if self.active:
            self._deactivate("stopping")

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # ---- commands ------------------------------------------------------------------------
    async def run(self, decide: Callable[[ControllerMachine], Decision]) -> Decision:
        """Decide, commit, apply: one command at a time."""
        async with self._lock:
            if not self.active or self.machine is None:
                raise NotController(self.mlog.leader_id)
            decision = decide(self.machine)
            await self._commit_locked(decision)
            return decision

    async def _commit_locked(self, decision: Decision) -> None:
        if not decision.records:
            return
        sizes = topic_sizes(self.image, decision.records)
        for r in decision.records:
            self.image.apply(r)
            self.recent.append(self.image.version, r)
        updates = kv_updates(self.image, decision.records, sizes)
        try:
            await self.mlog.propose(updates)
        except Exception as e:
            # Outcome unknown (timeout) or leadership lost: our image may be ahead of
            # the log. Step down; the next activation rebuilds from the log itself.
            self._deactivate(f"commit failed: {e!r}")
            if self.mlog.is_leader:
                self._activation = asyncio.get_running_loop().create_task(self._reactivate())
            if isinstance(e, NotLeaderError):
                raise NotController(e.leader_id) from None
            raise NotController(self.mlog.leader_id) from e
        self._wake()

    async def _tick_loop(self) -> None:
        while self.active:
            await asyncio.sleep(self.tick_ms / 1000)
            try:
                await self.run(lambda m: m.tick(now_ms()))
            except NotController:
                return
            except Exception:
                log.exception("controller tick failed")

    async def handle(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        """One entry point for every controller request (HTTP or in-process).

        Returns a JSON-ready answer including the metadata ``version`` after
        the command, so the caller can wait for its own image to catch up.
        """
        t = now_ms()
        if op == "register":
            reg_leos = {(x[0], int(x[1])): int(x[2]) for x in body.get("log_end_offsets", [])}
            d = await self.run(
                lambda m: m.register_broker(
                    int(body["broker_id"]), str(body["url"]), body.get("zone"),
                    bool(body.get("clean", True)), t, reg_leos,
                )
            )
            return {"broker_epoch": d.broker_epoch, "version": self.image.version}
        if op == "heartbeat":
            leos = {(x[0], int(x[1])): int(x[2]) for x in body.get("log_end_offsets", [])}
            await self.run(
                lambda m: m.heartbeat(int(body["broker_id"]), int(body["broker_epoch"]), t, leos)
            )
            b = self.image.brokers.get(int(body["broker_id"]))
            return {"version": self.image.version, "fenced": bool(b and b.fenced)}
        if op == "create_topic":
            cfg = TopicConfig.from_dict(body.get("config") or {})
            d = await self.run(
                lambda m: m.create_topic(
                    CreateTopic(
                        str(body["name"]), int(body.get("partitions", 1)),
                        int(body.get("replication_factor", 1)), cfg,
                    )
                )
            )
            return {"existed": d.existed, "version": self.image.version}
        if op == "delete_topic":
            await self.run(lambda m: m.delete_topic(str(body["name"])))
            return {"version": self.image.version}
        if op == "alter_partition":
            req = _alter_request(body)
            await self.run(lambda m: m.alter_partition(req))
            return {"version": self.image.version, **self._isr_answer(req)}
        if op == "alter_partitions":
            # Every ISR change one leader has pending, in one decision (one raft commit):
            # a follower dying shrinks the ISR of every partition it followed at once.
            reqs = [_alter_request({**x, "broker_id": body["broker_id"], "broker_epoch": body["broker_epoch"]})
                    for x in body["partitions"]]
            alter_refused: dict[int, str] = {}

            def alter_all(m: ControllerMachine) -> Decision:
                recs: list[R.Record] = []
                for i, rq in enumerate(reqs):
                    try:
                        recs += m.alter_partition(rq).records
                    except ControllerError as err:
                        alter_refused[i] = err.code
                return Decision(recs)

            await self.run(alter_all)
            return {"version": self.image.version, "results": [
                {"error": alter_refused[i]} if i in alter_refused else self._isr_answer(rq)
                for i, rq in enumerate(reqs)
            ]}
        if op == "confirm_leaderships":
            # Many partitions in one decision (one commit); stale ones are skipped.
            bid, bep = int(body["broker_id"]), int(body["broker_epoch"])
            cmds = [
                ConfirmLeadership(broker_id=bid, broker_epoch=bep, topic=str(t),
                                  partition=int(p), leader_epoch=int(e))
                for t, p, e in body["partitions"]
            ]
            refused: list[list[Any]] = []

            def confirm_all(m: ControllerMachine) -> Decision:
                recs: list[R.Record] = []
                for c in cmds:
                    try:
                        recs += m.confirm_leadership(c).records
                    except ControllerError as err:
                        refused.append([c.topic, c.partition, err.code])
                return Decision(recs)

            await self.run(confirm_all)
            return {"version": self.image.version, "refused": refused}
        if op == "confirm_leadership":
            c = ConfirmLeadership(
                broker_id=int(body["broker_id"]), broker_epoch=int(body["broker_epoch"]),
                topic=str(body["topic"]), partition=int(body["partition"]),
                leader_epoch=int(body["leader_epoch"]),
            )
            await self.run(lambda m: m.confirm_leadership(c))
            return {"version": self.image.version}
        if op == "leader_suspects":
            # Every partition a dead leader led, from one follower, in one decision.
            bid, bep = int(body["broker_id"]), int(body["broker_epoch"])
            reports = [
                LeaderSuspect(broker_id=bid, broker_epoch=bep, topic=str(tp), partition=int(p),
                              leader_epoch=int(le), partition_epoch=int(pe),
                              log_end_offset=int(leo))
                for tp, p, le, pe, leo in body["reports"]
            ]
            ignored: list[list[Any]] = []

            def suspect_all(m: ControllerMachine) -> Decision:
                recs: list[R.Record] = []
                for rep in reports:
                    try:
                        recs += m.report_leader_suspect(rep, t).records
                    except ControllerError as err:
                        ignored.append([rep.topic, rep.partition, err.code])
                return Decision(recs)

            await self.run(suspect_all)
            return {"version": self.image.version, "ignored": ignored}
        if op == "leader_suspect":
            s = LeaderSuspect(
                broker_id=int(body["broker_id"]), broker_epoch=int(body["broker_epoch"]),
                topic=str(body["topic"]), partition=int(body["partition"]),
                leader_epoch=int(body["leader_epoch"]),
                partition_epoch=int(body["partition_epoch"]),
                log_end_offset=int(body.get("log_end_offset", -1)),
            )
            await self.run(lambda m: m.report_leader_suspect(s, t))
            return {"version": self.image.version}
        if op == "put_entities":
            puts = [_put_entity(x) for x in body.get("entities") or []]
            d = await self.run(lambda m: m.put_entities(puts))
            return {"version": self.image.version, "existed": d.existed}
        raise ControllerError("INVALID_REQUEST", f"unknown controller operation {op!r}")

    def _isr_answer(self, req: AlterPartition) -> dict[str, Any]:
        p = self.image.partition(req.topic, req.partition)
        assert p is not None
        return {"isr": list(p.isr), "partition_epoch": p.partition_epoch, "leader_epoch": p.leader_epoch}

    async def metadata_since(self, version: int, wait_ms: int) -> dict[str, Any]:
        """Records after ``version`` (or the full image); long-polls up to ``wait_ms``."""
        if not self.active:
            raise NotController(self.mlog.leader_id)
        if version >= self.image.version and wait_ms > 0:
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), wait_ms / 1000)
        # Under the command lock: a commit in flight has applied its records to the
        # image but not yet committed them, and those must never reach a broker.
        async with self._lock:
            if not self.active:
                raise NotController(self.mlog.leader_id)
            return delta_response(self.image, self.recent, version)

    def last_heartbeat_ms(self, broker_id: int) -> int:
        if self.machine is None:
            return -1
        return self.machine.sessions.last_heartbeat_ms(broker_id)


def _alter_request(body: dict[str, Any]) -> AlterPartition:
    return AlterPartition(
        broker_id=int(body["broker_id"]), broker_epoch=int(body["broker_epoch"]),
        topic=str(body["topic"]), partition=int(body["partition"]),
        leader_epoch=int(body["leader_epoch"]),
        partition_epoch=int(body["partition_epoch"]),
        new_isr=tuple(int(x) for x in body["new_isr"]),
        broker_epochs={int(k): int(v) for k, v in (body.get("broker_epochs") or {}).items()},
    )


ENTITY_VALUE_BYTES_MAX = 32 * 1024
"""One entity's JSON must fit comfortably in a raft entry (the adapter bounds datagrams)."""


def _put_entity(x: dict[str, Any]) -> PutEntity:
    """Parse one ``put_entities`` item; refuses values too large for the metadata log."""
    value = x.get("value")
    if value is not None and not isinstance(value, dict):
        raise ControllerError("INVALID_REQUEST", "an entity value is a JSON object or null")
    if value is not None and len(orjson.dumps(value)) > ENTITY_VALUE_BYTES_MAX:
        raise ControllerError("INVALID_REQUEST", f"an entity value is at most {ENTITY_VALUE_BYTES_MAX} bytes")
    expect = x.get("expect")
    return PutEntity(kind=str(x["kind"]), name=str(x["name"]), value=value,
                     expect=None if expect is None else str(expect))
