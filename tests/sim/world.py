"""One simulated cluster run from a seed: brokers, controller, clients, faults, checker.

``run_seed(seed, cfg)`` is the whole API. Every random choice comes from one
``random.Random(seed)``, time is the scheduler's, so a seed replays exactly.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from replication.controller.image import NO_LEADER, TopicConfig
from replication.controller.machine import ControllerSettings
from replication.core.leader import LeaderState
from replication.core.rules import ReplicationSettings, SafetyRules
from tests.sim.broker import SimBroker
from tests.sim.checker import CORE_ASSERTION, Checker, Violation
from tests.sim.clients import Consumer, Producer
from tests.sim.controller import SimController
from tests.sim.scheduler import CONTROLLER, Network, NetworkConfig, Scheduler
from tests.sim.simlog import Disk, SimLog

TOPIC = "t"


@dataclass(frozen=True)
class SimConfig:
    """Shape, timing (ms) and fault rates of one run."""

    brokers: int = 3
    partitions: int = 1
    replication_factor: int = 3
    min_insync_replicas: int = 2
    duration_ms: int = 4_000
    settle_ms: int = 1_500
    rules: SafetyRules = field(default_factory=SafetyRules)
    replication: ReplicationSettings = field(
        default_factory=lambda: ReplicationSettings(
            replica_lag_time_ms=250,
            replica_lag_max_records=40,
            leader_timeout_ms=300,
            alter_partition_retry_ms=150,
        )
    )
    controller: ControllerSettings = field(
        default_factory=lambda: ControllerSettings(
            session_timeout_ms=400,
            election_timeout_ms=250,
            suspect_window_ms=800,
            offline_retry_ms=600,
        )
    )
    network: NetworkConfig = field(default_factory=NetworkConfig)
    heartbeat_ms: int = 80
    metadata_ms: int = 40
    tick_ms: int = 20
    flush_interval_ms: int = 600
    fetch_timeout_ms: int = 120
    fetch_idle_ms: int = 8
    fetch_max_records: int = 6
    produce_interval_ms: int = 6
    produce_timeout_ms: int = 600
    consume_interval_ms: int = 15
    consumers: int = 2
    fault_interval_ms: int = 250
    max_concurrent_faults: int = 2
    partial_commit_p: float = 0.0
    """Chance a multi-record decision commits only in part (controller fails midway).
    Off: the controller service commits a decision as one atomic raft proposal."""
    recent_capacity: int = 40
    trace_lines: int = 400


@dataclass
class SimResult:
    seed: int
    events: int
    records_acked: int
    records_consumed: int
    committed: int
    leader_epochs: int
    faults: dict[str, int]
    offline_at_end: int
    violation: Violation | None
    trace: list[str]

    def report(self) -> str:
        """The seed, the violation and the readable trace leading to it."""
        head = f"seed {self.seed}: {self.violation}" if self.violation else f"seed {self.seed}: ok"
        return "\n".join([head, "--- last events ---", *self.trace, head])


class World:
    def __init__(self, seed: int, cfg: SimConfig) -> None:
        self.seed = seed
        self.cfg = cfg
        self.rng = random.Random(seed)
        self.sched = Scheduler()
        self.net = Network(self.sched, self.rng, cfg.network)
        self.keys = [(TOPIC, p) for p in range(cfg.partitions)]
        self.checker = Checker(self.keys)
        self._trace: deque[tuple[int, str, tuple[Any, ...]]] = deque(maxlen=cfg.trace_lines)
        self.controller = SimController(self, cfg.controller, cfg.recent_capacity)
        self.disks = {b: Disk() for b in range(1, cfg.brokers + 1)}
        self.incarnations = dict.fromkeys(self.disks, 0)
        self.brokers: dict[int, SimBroker] = {}
        self.record_id = 0
        self.produce_until_ms = cfg.duration_ms
        self.faults: dict[str, int] = {}
        self.lossy: set[int] = set()  # brokers that lost data and have not rejoined every ISR
        self.active_faults = 0
        self.consumers: list[Consumer] = []

    @property
    def now_ms(self) -> int:
        return self.sched.now_ms

    def trace(self, fmt: str, *args: Any) -> None:
        self._trace.append((self.sched.now_ms, fmt, args))

    def trace_lines(self) -> list[str]:
        return [f"{t:>7} ms  {fmt % args}" for t, fmt, args in self._trace]

    def next_record_id(self) -> int:
        self.record_id += 1
        return self.record_id

    def pick_broker(self, key: tuple[str, int]) -> int:
        p = self.controller.image.partition(*key)
        if p is not None and p.leader != NO_LEADER and self.rng.random() < 0.85:
            return p.leader
        return self.rng.randint(1, self.cfg.brokers)

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        cfg = self.cfg
        violation: Violation | None = None
        events = 0
        try:
            topic_cfg = TopicConfig(min_insync_replicas=cfg.min_insync_replicas)
            epochs = self.controller.bootstrap(
                list(self.disks), TOPIC, cfg.partitions, cfg.replication_factor, topic_cfg
            )
            self.controller.start()
            for b, epoch in epochs.items():
                self.brokers[b] = SimBroker(self, b, self.disks[b], 0)
                self.brokers[b].start(epoch)
            Producer(self, 100).start()
            for i in range(cfg.consumers):
                self.consumers.append(Consumer(self, 200 + i))
                self.consumers[-1].start()
            self.sched.after(self.rng.randint(1, 2 * cfg.fault_interval_ms), self._fault_loop)
            events += self.sched.run_until(cfg.duration_ms, self._check)
            self._heal_everything()
            events += self.sched.run_until(cfg.duration_ms + cfg.settle_ms, self._check)
            self.checker.final_check(self._final_leaders())
        except Violation as v:
            violation = v
        except AssertionError as e:  # an assertion of the core or the driver fired
            violation = Violation(CORE_ASSERTION, f"{type(e).__name__}: {e}")
        acked = sum(len(a) for a in self.checker.acked.values())
        return SimResult(
            seed=self.seed,
            events=events,
            records_acked=acked,
            records_consumed=sum(c.read for c in self.consumers),
            committed=sum(len(c) for c in self.checker.committed.values()),
            leader_epochs=len(self.checker.epoch_leaders),
            faults=dict(self.faults),
            offline_at_end=sum(1 for log in self._final_leaders().values() if log is None),
            violation=violation,
            trace=self.trace_lines(),
        )

    def _check(self) -> None:
        self.checker.check(self.controller.image, self.brokers)

    def _final_leaders(self) -> dict[tuple[str, int], SimLog | None]:
        out: dict[tuple[str, int], SimLog | None] = {}
        for key in self.keys:
            p = self.controller.image.partition(*key)
            out[key] = None
            if p is not None and p.leader != NO_LEADER:
                b = self.brokers[p.leader]
                role = b.roles.get(key)
                if b.up and isinstance(role, LeaderState) and role.leader_epoch == p.leader_epoch:
                    out[key] = b.disk.log(key)
        return out

    # ------------------------------------------------------------------ faults
    def _fault_loop(self) -> None:
        if self.now_ms >= self.cfg.duration_ms:
            return
        self._update_lossy()
        if self.active_faults < self.cfg.max_concurrent_faults:
            self._inject()
        self.sched.after(self.rng.randint(1, 2 * self.cfg.fault_interval_ms), self._fault_loop)

    def _count(self, name: str) -> None:
        self.faults[name] = self.faults.get(name, 0) + 1

    def _inject(self) -> None:
        rng = self.rng
        up = [b for b, sb in self.brokers.items() if sb.up]
        down = len(self.brokers) - len(up)
        kind = rng.choices(
            ("kill", "power_loss", "clean_restart", "isolate", "cut_link", "controller_down",
             "isolate_controller_link", "slow_link"),
            weights=(2, 2, 1, 2, 3, 1, 2, 4),
        )[0]
        duration = rng.randint(100, 900)
        if kind in ("kill", "power_loss", "clean_restart"):
            if down >= 1 or not up:
                return
            b = rng.choice(up)
            lossy = kind == "power_loss"
            if lossy and len(self.lossy) >= self.cfg.min_insync_replicas - 1:
                kind, lossy = "kill", False  # seed 001 §6.2: at most min ISR - 1 lossy shutdowns
            self._count(kind)
            self.trace("FAULT %s broker %d for %d ms", kind, b, duration)
            self.brokers[b].stop(clean=kind == "clean_restart", lose_unflushed=lossy)
            if lossy:
                self.lossy.add(b)
            self.active_faults += 1
            self.sched.after(duration, self._restart, b)
        elif kind == "isolate":
            b = rng.choice(list(self.brokers))
            peers = [n for n in [*self.brokers, CONTROLLER] if n != b]
            links = [(b, n) for n in peers] + [(n, b) for n in peers]
            self._cut(links, duration, f"isolate broker {b}")
        elif kind == "cut_link":
            a, b = rng.sample(list(self.brokers), 2)
            self._cut([(a, b)], duration, f"cut link {a}->{b} (asymmetric)")
        elif kind == "isolate_controller_link":
            b = rng.choice(list(self.brokers))
            links = rng.choice(([(b, CONTROLLER)], [(CONTROLLER, b)],
                                [(b, CONTROLLER), (CONTROLLER, b)]))
            self._cut(links, duration, f"cut controller links {links}")
        elif kind == "slow_link":
            a, b = rng.sample([*self.brokers, CONTROLLER], 2)
            extra = rng.randint(30, 400)
            self._count("slow link")
            self.trace("FAULT slow link %d->%d (+%d ms) for %d ms", a, b, extra, duration)
            self.net.set_slow(a, b, extra)
            self.active_faults += 1
            self.sched.after(duration, self._unslow, a, b)
        else:
            self._count(kind)
            self.trace("FAULT controller unavailable for %d ms", duration)
            self.controller.set_available(False)
            self.active_faults += 1
            self.sched.after(duration, self._controller_back)

    def _cut(self, links: list[tuple[int, int]], duration: int, what: str) -> None:
        self._count(what.split(" ")[0] + " " + what.split(" ")[1])
        self.trace("FAULT %s for %d ms", what, duration)
        for a, b in links:
            self.net.cut(a, b)
        self.active_faults += 1
        self.sched.after(duration, self._heal, links, what)

    def _heal(self, links: list[tuple[int, int]], what: str) -> None:
        for a, b in links:
            self.net.heal(a, b)
        self.active_faults -= 1
        self.trace("heal %s", what)

    def _unslow(self, a: int, b: int) -> None:
        self.net.set_slow(a, b, 0)
        self.active_faults -= 1
        self.trace("heal slow link %d->%d", a, b)

    def _restart(self, b: int) -> None:
        if self.brokers[b].up:
            return
        self.incarnations[b] += 1
        self.brokers[b] = SimBroker(self, b, self.disks[b], self.incarnations[b])
        self.trace("restart broker %d (incarnation %d, clean=%s, LEOs %s)", b,
                   self.incarnations[b], self.disks[b].clean_marker,
                   {k: lg.log_end_offset for k, lg in self.disks[b].logs.items()})
        self.brokers[b].start()
        self.active_faults -= 1

    def _controller_back(self) -> None:
        self.controller.set_available(True)
        self.active_faults -= 1

    def _update_lossy(self) -> None:
        """A lossy broker is whole again once it is back in every ISR it belongs to."""
        image = self.controller.image
        for b in list(self.lossy):
            sb = self.brokers[b]
            meta = image.brokers.get(b)
            if not sb.up or meta is None or meta.broker_epoch != sb.broker_epoch:
                continue
            if all(b in p.isr for p in image.all_partitions() if b in p.replicas):
                self.lossy.discard(b)

    def _heal_everything(self) -> None:
        self.produce_until_ms = self.now_ms
        self.net.cuts.clear()
        self.net.slow.clear()
        self.controller.set_available(True)
        for b, sb in self.brokers.items():
            if not sb.up:
                self._restart(b)
        self.trace("=== healed: settling ===")


def run_seed(seed: int, cfg: SimConfig | None = None) -> SimResult:
    """Run one seeded simulation; the result holds any violation and the trace."""
    return World(seed, cfg or SimConfig()).run()
