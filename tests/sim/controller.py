"""The controller as one logical state machine that can be unavailable (raft out of scope).

Each request runs the real ``ControllerMachine`` method; its records are
applied at once (as if raft committed them) and remembered for deltas. While
unavailable, requests are lost; on coming back a new active controller starts
(``ControllerMachine.activate``: fresh soft state, as after a raft failover).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from replication.controller import records as R
from replication.controller.deltas import RecentRecords, delta_response
from replication.controller.errors import ControllerError
from replication.controller.image import MetadataImage, TopicConfig
from replication.controller.machine import (
    AlterPartition,
    ConfirmLeadership,
    ControllerMachine,
    ControllerSettings,
    CreateTopic,
    Decision,
    LeaderSuspect,
)
from tests.sim.messages import ControllerCall, ControllerReply
from tests.sim.scheduler import CONTROLLER

if TYPE_CHECKING:
    from tests.sim.world import World


class ControllerCrash(Exception):
    """The active controller failed in the middle of committing a decision."""


class SimController:
    def __init__(self, world: World, settings: ControllerSettings, recent_capacity: int) -> None:
        self.world = world
        self.settings = settings
        self.image = MetadataImage(cluster_id="sim")
        self.machine = ControllerMachine(self.image, settings)
        self.recent = RecentRecords(recent_capacity)
        self.available = True
        self.failovers = 0
        self.partial_commits = False  # not during bootstrap
        self.repair_pending = False  # a decision was committed in part; tick will finish it

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.world.net.attach(CONTROLLER, 0, self.on_message)
        self.machine.activate(self.world.now_ms)
        self.partial_commits = True
        self.world.sched.after(50, self._tick)

    def set_available(self, available: bool) -> None:
        if available == self.available:
            return
        self.available = available
        if available:
            # A new active controller: same committed image, fresh soft state.
            self.failovers += 1
            self.machine = ControllerMachine(self.image, self.settings)
            self.machine.activate(self.world.now_ms)
            self.world.net.attach(CONTROLLER, self.failovers, self.on_message)
            self.world.trace("controller available again (failover %d)", self.failovers)
        else:
            self.world.net.detach(CONTROLLER)
            self.world.trace("controller unavailable")

    def _tick(self) -> None:
        if self.available:
            try:
                self.commit(self.machine.tick(self.world.now_ms), "tick")
            except ControllerCrash:
                self._crash()
        self.world.sched.after(50, self._tick)

    def _crash(self) -> None:
        self.set_available(False)
        self.world.sched.after(self.world.rng.randint(50, 400), self.set_available, True)

    # ------------------------------------------------------------------ commits
    def commit(self, d: Decision, why: str) -> Decision:
        if not d.records:
            return d
        before = {(p.topic, p.partition): replace(p) for p in self.image.all_partitions()}
        records = d.records
        partial = (
            self.partial_commits
            and len(records) > 1
            and self.world.rng.random() < self.world.cfg.partial_commit_p
        )
        if partial:
            # The decision was split over several raft entries and the controller
            # failed between them: only a prefix is committed (machine.tick finishes it).
            records = records[: self.world.rng.randint(1, len(records) - 1)]
            self.world.trace("FAULT controller fails after %d of %d records", len(records),
                             len(d.records))
        for rec in records:
            if isinstance(rec, R.RegisterBrokerRecord):
                self.world.checker.on_registered(rec.broker_id, rec.broker_epoch, rec.clean)
            self.image.apply(rec)
            self.recent.append(self.image.version, rec)
            self.world.trace("controller commit (%s) v%d %r", why, self.image.version, rec)
        if partial:
            self.repair_pending = True
        elif why == "tick":
            self.repair_pending = False  # a complete tick finishes what a partial commit left
        self.world.checker.on_controller_commit(
            before, self.image, self.world.brokers, image_sound=not self.repair_pending
        )
        if partial:
            raise ControllerCrash()
        return d

    def bootstrap(self, broker_ids: list[int], topic: str, partitions: int, rf: int,
                  config: TopicConfig) -> dict[int, int]:
        """Register every broker and create the topic before the run starts."""
        epochs = {}
        for b in broker_ids:
            d = self.commit(
                self.machine.register_broker(b, f"sim://{b}", None, True, 0), "bootstrap"
            )
            epochs[b] = d.broker_epoch
        self.commit(self.machine.create_topic(CreateTopic(topic, partitions, rf, config)), "create")
        return epochs

    # ------------------------------------------------------------------ requests
    def on_message(self, src: int, msg: Any) -> None:
        assert isinstance(msg, ControllerCall)
        now = self.world.now_ms
        try:
            result = self._handle(msg.kind, msg.payload, now)
            reply = ControllerReply(msg.corr, None, result)
        except ControllerError as e:
            reply = ControllerReply(msg.corr, e.code)
        except ControllerCrash:
            self._crash()
            return
        self.world.net.send(CONTROLLER, src, reply)

    def _handle(self, kind: str, payload: Any, now: int) -> Any:
        m = self.machine
        if kind == "metadata":
            return delta_response(self.image, self.recent, payload)
        if kind == "register":
            broker_id, clean = payload
            d = self.commit(m.register_broker(broker_id, f"sim://{broker_id}", None, clean, now),
                            f"register {broker_id}")
            return d.broker_epoch
        if kind == "heartbeat":
            broker_id, epoch, leos = payload
            self.commit(m.heartbeat(broker_id, epoch, now, leos), f"heartbeat {broker_id}")
            return None
        if kind == "alter_partition":
            req: AlterPartition = payload
            p = self.image.partition(req.topic, req.partition)
            if not self.world.cfg.rules.partition_epoch_check and p is not None:
                # Fault injection: a controller without seed 001 §6.3 rule 4.
                req = replace(req, partition_epoch=p.partition_epoch)
            self.commit(m.alter_partition(req), f"alter_partition from {req.broker_id}")
            p = self.image.partition(req.topic, req.partition)
            assert p is not None
            return (p.isr, p.partition_epoch)
        if kind == "confirm":
            cmd: ConfirmLeadership = payload
            self.commit(m.confirm_leadership(cmd), f"confirm {cmd.broker_id}")
            return None
        if kind == "suspect":
            rep: LeaderSuspect = payload
            self.commit(m.report_leader_suspect(rep, now), f"suspect from {rep.broker_id}")
            return None
        raise AssertionError(kind)
