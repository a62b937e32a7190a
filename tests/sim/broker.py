"""A simulated broker: the driver around the real protocol core.

It does what the asyncio server does, with messages instead of HTTP: register
and heartbeat, poll metadata deltas, switch partition roles with the core's
verbs, run the follower fetch loop, answer fetches, produce and consume, send
AlterPartition/ConfirmLeadership/leader-suspect calls, flush its disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replication.controller.deltas import apply_delta
from replication.controller.image import ELECTION, MetadataImage
from replication.controller.machine import AlterPartition, ConfirmLeadership, LeaderSuspect
from replication.core.actions import (
    Action,
    AppendFetched,
    HighWatermarkAdvanced,
    ReportLeaderSuspect,
    SendAlterPartition,
    Truncate,
)
from replication.core.follower import FollowerState
from replication.core.leader import LeaderState
from replication.core.messages import FetchRequest, FetchResponse
from tests.sim.messages import (
    Consume,
    ConsumeReply,
    ControllerCall,
    ControllerReply,
    Fetch,
    FetchReply,
    Produce,
    ProduceReply,
)
from tests.sim.scheduler import CONTROLLER
from tests.sim.simlog import Disk

if TYPE_CHECKING:
    from tests.sim.world import World

Key = tuple[str, int]
Role = LeaderState | FollowerState


@dataclass(slots=True)
class _Waiter:
    offset: int
    client: int
    corr: int
    record: int
    deadline_ms: int


class SimBroker:
    """One incarnation of a broker process; ``disk`` outlives it."""

    def __init__(self, world: World, broker_id: int, disk: Disk, incarnation: int) -> None:
        self.world = world
        self.id = broker_id
        self.disk = disk
        self.incarnation = incarnation
        self.up = False
        self.clean_start = disk.clean_marker
        self.broker_epoch = -1
        self.image = MetadataImage()
        self.roles: dict[Key, Role] = {}
        self.fetching: dict[Key, tuple[FetchRequest, int]] = {}
        self.waiters: dict[Key, list[_Waiter]] = {}
        self.calls: dict[int, tuple[str, Any]] = {}
        self.corr = 0
        self.confirmed: dict[Key, int] = {}
        self.last_hw: dict[Key, int] = {}

    # ------------------------------------------------------------------ lifecycle
    def start(self, broker_epoch: int = -1) -> None:
        """Start the process; ``broker_epoch`` >= 0 when bootstrap registered it already."""
        self.up = True
        self.disk.clean_marker = False
        self.broker_epoch = broker_epoch
        self.world.net.attach(self.id, self.incarnation, self.on_message)
        s = self.world.sched
        if broker_epoch < 0:
            self._register()
        s.after(self.world.rng.randint(1, 20), self._heartbeat_loop)
        s.after(self.world.rng.randint(1, 20), self._metadata_loop)
        s.after(self.world.rng.randint(1, 20), self._tick_loop)
        s.after(self.world.rng.randint(1, self.world.cfg.flush_interval_ms), self._flush_loop)

    def stop(self, *, clean: bool, lose_unflushed: bool) -> None:
        """Stop this incarnation: clean shutdown, kill -9, or power loss."""
        self.up = False
        self.world.net.detach(self.id)
        if clean:
            self.disk.flush(self._hws())
            self.disk.clean_marker = True
        elif lose_unflushed:
            self.disk.power_loss()

    def _alive(self) -> bool:
        return self.up and self.world.brokers[self.id] is self

    # ------------------------------------------------------------------ loops
    def _heartbeat_loop(self) -> None:
        if not self._alive():
            return
        if self.broker_epoch < 0:
            self._register()
        else:
            leos = {k: self.disk.log(k).log_end_offset for k in self.roles}
            self._call("heartbeat", (self.id, self.broker_epoch, leos))
        self.world.sched.after(self.world.cfg.heartbeat_ms, self._heartbeat_loop)

    def _register(self) -> None:
        self._call("register", (self.id, self.clean_start))

    def _metadata_loop(self) -> None:
        if not self._alive():
            return
        self._call("metadata", self.image.version, self.image.version)
        self.world.sched.after(self.world.cfg.metadata_ms, self._metadata_loop)

    def _flush_loop(self) -> None:
        if not self._alive():
            return
        self.disk.flush(self._hws())
        self.world.sched.after(self.world.cfg.flush_interval_ms, self._flush_loop)

    def _tick_loop(self) -> None:
        if not self._alive():
            return
        now = self.world.now_ms
        for key, role in list(self.roles.items()):
            log = self.disk.log(key)
            if isinstance(role, LeaderState):
                self._run(key, role.tick(now))
                self._expire_waiters(key, now)
                p = self.image.partition(*key)
                if p is not None and p.status == ELECTION and p.leader == self.id:
                    self._confirm(key, role.leader_epoch)
            else:
                self._run(key, role.tick(log, now))
                inflight = self.fetching.get(key)
                if inflight is not None and now - inflight[1] > self.world.cfg.fetch_timeout_ms:
                    del self.fetching[key]
                if key not in self.fetching:
                    self._send_fetch(key)
        self.world.sched.after(self.world.cfg.tick_ms, self._tick_loop)

    def _hws(self) -> dict[Key, int]:
        return {k: r.high_watermark for k, r in self.roles.items()}

    # ------------------------------------------------------------------ controller calls
    def _call(self, kind: str, payload: Any, context: Any = None) -> None:
        self.corr += 1
        self.calls[self.corr] = (kind, context)
        self.world.net.send(self.id, CONTROLLER, ControllerCall(self.corr, kind, payload))

    def _on_controller_reply(self, msg: ControllerReply) -> None:
        entry = self.calls.pop(msg.corr, None)
        if entry is None:
            return  # a duplicate
        kind, context = entry
        if kind == "register" and msg.error is None and msg.result > self.broker_epoch:
            # A retried registration may be answered twice; the newest grant counts
            # (the controller fenced the older epoch when granting it).
            if self.broker_epoch >= 0:
                self._drop_all_roles()
            self.broker_epoch = msg.result
            self.world.trace("broker %d registered at epoch %d", self.id, self.broker_epoch)
        elif kind == "heartbeat" and msg.error == "STALE_BROKER_EPOCH":
            self.world.trace("broker %d epoch %d superseded; registers again", self.id,
                             self.broker_epoch)
            self._drop_all_roles()
            self.broker_epoch = -1
            self._register()
        elif kind == "metadata" and msg.error is None:
            self._on_metadata(context, msg.result)
        elif kind == "alter_partition":
            key, leader_epoch = context
            role = self.roles.get(key)
            if isinstance(role, LeaderState) and role.leader_epoch == leader_epoch:
                if msg.error is None:
                    isr, pe = msg.result
                    actions = role.on_alter_partition_result(isr=isr, partition_epoch=pe)
                else:
                    actions = role.on_alter_partition_result(error=msg.error)
                self.world.trace("broker %d alter_partition %s -> %s %s (isr %s)", self.id,
                                 key, msg.error, msg.result, role.isr)
                self._run(key, actions)

    # ------------------------------------------------------------------ metadata
    def _on_metadata(self, asked_from: int, body: dict[str, Any]) -> None:
        if "image" in body:
            if body["version"] <= self.image.version:
                return
        elif asked_from != self.image.version or not body["records"]:
            return  # a late or duplicated answer, or nothing new
        self.image = apply_delta(self.image, body)
        me = self.image.brokers.get(self.id)
        if me is None or me.broker_epoch != self.broker_epoch:
            return  # act only on metadata that knows this incarnation (seed 001 §6.5.1)
        for p in self.image.all_partitions():
            if self.id in p.replicas:
                self._reconcile((p.topic, p.partition))

    def _reconcile(self, key: Key) -> None:
        p = self.image.partition(*key)
        assert p is not None
        role = self.roles.get(key)
        now = self.world.now_ms
        cfg = self.world.cfg
        log = self.disk.log(key)
        if role is not None:
            self.world.checker.on_role(self.id, key, role.leader_epoch, p.leader_epoch)
        min_isr = self.image.topics[key[0]].config.min_insync_replicas
        if p.leader == self.id:
            if isinstance(role, LeaderState) and role.leader_epoch == p.leader_epoch:
                self._run(key, role.on_metadata(
                    isr=p.isr, partition_epoch=p.partition_epoch, assignment=p.replicas,
                    min_insync_replicas=min_isr))
                return
            hw = role.high_watermark if role is not None else self._checkpoint_hw(key)
            self._drop_role(key)
            leader = LeaderState.become_leader(
                local_broker=self.id, leader_epoch=p.leader_epoch,
                partition_epoch=p.partition_epoch, isr=p.isr, assignment=p.replicas,
                min_insync_replicas=min_isr, log=log, high_watermark=hw, now_ms=now,
                settings=cfg.replication, rules=cfg.rules)
            self.roles[key] = leader
            self.world.checker.on_become_leader(key, p.leader_epoch, self.id, self.incarnation)
            self.world.trace("broker %d becomes leader of %s epoch %d (LEO %d, HW %d, ISR %s)",
                             self.id, key, p.leader_epoch, log.log_end_offset, leader.high_watermark,
                             p.isr)
            self.last_hw[key] = leader.high_watermark
            self._leader_hw(key)
            if p.status == ELECTION:
                self._confirm(key, p.leader_epoch)
            return
        if isinstance(role, FollowerState) and role.leader_epoch == p.leader_epoch:
            role.on_metadata(partition_epoch=p.partition_epoch)
            return
        hw = role.high_watermark if role is not None else self._checkpoint_hw(key)
        self._drop_role(key)
        follower, actions = FollowerState.become_follower(
            local_broker=self.id, leader=p.leader, leader_epoch=p.leader_epoch,
            partition_epoch=p.partition_epoch, broker_epoch=self.broker_epoch, log=log,
            high_watermark=hw, now_ms=now, settings=cfg.replication, rules=cfg.rules)
        self.roles[key] = follower
        self.world.trace("broker %d follows %d for %s epoch %d (LEO %d, HW %d)", self.id,
                         p.leader, key, p.leader_epoch, log.log_end_offset, hw)
        self._run(key, actions)
        self._send_fetch(key)

    def _checkpoint_hw(self, key: Key) -> int:
        return min(self.disk.hw_checkpoint.get(key, 0), self.disk.log(key).log_end_offset)

    def _drop_all_roles(self) -> None:
        for key in list(self.roles):
            self._drop_role(key)

    def _drop_role(self, key: Key) -> None:
        self.roles.pop(key, None)
        self.fetching.pop(key, None)
        for w in self.waiters.pop(key, []):
            self.world.net.send(self.id, w.client, ProduceReply(w.corr, "NOT_LEADER"))

    def _confirm(self, key: Key, leader_epoch: int) -> None:
        cmd = ConfirmLeadership(self.id, self.broker_epoch, key[0], key[1], leader_epoch)
        self._call("confirm", cmd)

    # ------------------------------------------------------------------ actions
    def _run(self, key: Key, actions: list[Action]) -> None:
        log = self.disk.log(key)
        role = self.roles.get(key)
        for a in actions:
            match a:
                case SendAlterPartition():
                    assert isinstance(role, LeaderState)
                    req = AlterPartition(
                        broker_id=self.id, broker_epoch=self.broker_epoch, topic=key[0],
                        partition=key[1], leader_epoch=a.leader_epoch,
                        partition_epoch=a.partition_epoch, new_isr=a.new_isr,
                        broker_epochs=dict(a.broker_epochs))
                    self.world.trace("broker %d sends AlterPartition %s isr %s pe %d", self.id,
                                     key, a.new_isr, a.partition_epoch)
                    self._call("alter_partition", req, (key, a.leader_epoch))
                case Truncate():
                    self.world.trace("broker %d truncates %s to %d (LEO %d)", self.id, key,
                                     a.offset, log.log_end_offset)
                    log.truncate_to(a.offset)
                    if isinstance(role, FollowerState):
                        role.on_log_changed(log)
                case ReportLeaderSuspect():
                    assert isinstance(role, FollowerState)
                    rep = LeaderSuspect(self.id, self.broker_epoch, key[0], key[1],
                                        a.leader_epoch, a.partition_epoch, a.log_end_offset)
                    self.world.trace("broker %d suspects leader %d of %s", self.id, a.leader, key)
                    self._call("suspect", rep)
                case HighWatermarkAdvanced():
                    pass  # handled by _leader_hw after every leader call
                case AppendFetched():
                    raise AssertionError("handled in _on_fetch_reply")
        if isinstance(role, LeaderState):
            self._leader_hw(key)

    def _leader_hw(self, key: Key) -> None:
        """Tell the checker about the leader's HW and complete acks=all waiters."""
        role = self.roles.get(key)
        assert isinstance(role, LeaderState)
        hw = role.high_watermark
        self.world.checker.on_leader_hw(self.id, key, self.disk.log(key), hw)
        if hw == self.last_hw.get(key, -1):
            return
        self.last_hw[key] = hw
        waiting = self.waiters.get(key, [])
        done = [w for w in waiting if w.offset < hw]
        if done:
            self.waiters[key] = [w for w in waiting if w.offset >= hw]
            for w in done:
                self.world.checker.on_ack(key, w.offset, w.record)
                self.world.net.send(self.id, w.client, ProduceReply(w.corr, None, w.offset))

    def _expire_waiters(self, key: Key, now: int) -> None:
        waiting = self.waiters.get(key, [])
        late = [w for w in waiting if w.deadline_ms <= now]
        if late:
            self.waiters[key] = [w for w in waiting if w.deadline_ms > now]
            for w in late:
                self.world.net.send(self.id, w.client, ProduceReply(w.corr, "TIMEOUT"))

    # ------------------------------------------------------------------ fetching
    def _send_fetch(self, key: Key) -> None:
        role = self.roles.get(key)
        if not isinstance(role, FollowerState) or key in self.fetching:
            return
        req = role.build_fetch(self.disk.log(key))
        if req is None:
            return
        self.fetching[key] = (req, self.world.now_ms)
        self.world.net.send(self.id, role.leader, Fetch(key, req))

    def _on_fetch(self, src: int, msg: Fetch) -> None:
        role = self.roles.get(msg.key)
        log = self.disk.log(msg.key)
        if not isinstance(role, LeaderState):
            resp = FetchResponse(msg.req.fetch_offset, -1, -1, 0, error="NOT_LEADER")
            self.world.net.send(self.id, src, FetchReply(msg.key, msg.req, resp, ()))
            return
        resp, actions = role.handle_fetch(msg.req, log, self.world.now_ms)
        self._run(msg.key, actions)
        records: tuple[tuple[int, int], ...] = ()
        if resp.records_available:
            start = msg.req.fetch_offset
            end = min(log.log_end_offset, start + self.world.cfg.fetch_max_records)
            records = tuple((log.epoch_at(o), log.records[o]) for o in range(start, end))
        self.world.net.send(self.id, src, FetchReply(msg.key, msg.req, resp, records))

    def _on_fetch_reply(self, msg: FetchReply) -> None:
        role = self.roles.get(msg.key)
        inflight = self.fetching.get(msg.key)
        if not isinstance(role, FollowerState):
            return
        if inflight is not None and inflight[0] == msg.req:
            del self.fetching[msg.key]
        log = self.disk.log(msg.key)
        actions = role.on_fetch_response(msg.req, msg.resp, log, self.world.now_ms)
        appended = False
        for a in actions:
            if isinstance(a, AppendFetched):
                assert a.offset == log.log_end_offset
                for epoch, record in msg.records:
                    log.append(epoch, record)
                role.on_log_changed(log)
                appended = True
        self._run(msg.key, [a for a in actions if not isinstance(a, AppendFetched)])
        if role.high_watermark != self.last_hw.get(msg.key):
            self.last_hw[msg.key] = role.high_watermark
        if msg.key not in self.fetching:
            delay = 0 if appended or actions else self.world.cfg.fetch_idle_ms
            self.world.sched.after(delay, self._send_fetch_if_alive, msg.key)

    def _send_fetch_if_alive(self, key: Key) -> None:
        if self._alive():
            self._send_fetch(key)

    # ------------------------------------------------------------------ clients
    def _on_produce(self, src: int, msg: Produce) -> None:
        role = self.roles.get(msg.key)
        if not isinstance(role, LeaderState):
            self.world.net.send(self.id, src, ProduceReply(msg.corr, "NOT_LEADER"))
            return
        if msg.acks == "all" and not role.can_commit():
            self.world.net.send(self.id, src, ProduceReply(msg.corr, "NOT_ENOUGH_REPLICAS"))
            return
        log = self.disk.log(msg.key)
        offset = log.append(role.leader_epoch, msg.record)
        role.on_local_append(log.log_end_offset)
        if msg.acks == "all":
            deadline = self.world.now_ms + self.world.cfg.produce_timeout_ms
            self.waiters.setdefault(msg.key, []).append(
                _Waiter(offset, src, msg.corr, msg.record, deadline))
        elif msg.acks == "leader":
            self.world.net.send(self.id, src, ProduceReply(msg.corr, None, offset))
        self._leader_hw(msg.key)

    def _on_consume(self, src: int, msg: Consume) -> None:
        role = self.roles.get(msg.key)
        if not isinstance(role, LeaderState):
            self.world.net.send(self.id, src, ConsumeReply(msg.corr, "NOT_LEADER", -1))
            return
        epoch = role.leader_epoch
        if msg.leader_epoch > epoch:
            self.world.net.send(self.id, src, ConsumeReply(msg.corr, "UNKNOWN_LEADER_EPOCH", epoch))
            return
        if msg.leader_epoch < epoch:
            self.world.net.send(self.id, src, ConsumeReply(msg.corr, "FENCED_LEADER_EPOCH", epoch))
            return
        hw = role.applied_high_watermark
        if hw is None:
            self.world.net.send(self.id, src, ConsumeReply(msg.corr, "HW_UNKNOWN", epoch))
            return
        log = self.disk.log(msg.key)
        end = max(msg.offset, min(hw, msg.offset + 10))
        self.world.net.send(
            self.id, src, ConsumeReply(msg.corr, None, epoch, hw, tuple(log.records[msg.offset:end])))

    # ------------------------------------------------------------------ dispatch
    def on_message(self, src: int, msg: Any) -> None:
        if not self._alive():
            return
        match msg:
            case ControllerReply():
                self._on_controller_reply(msg)
            case Fetch():
                if self.broker_epoch >= 0:
                    self._on_fetch(src, msg)
            case FetchReply():
                self._on_fetch_reply(msg)
            case Produce():
                self._on_produce(src, msg)
            case Consume():
                self._on_consume(src, msg)
            case _:
                raise AssertionError(msg)
