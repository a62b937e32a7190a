"""Faults on real processes and real links: what to break, for how long, and how to undo it.

A schedule is a list of :class:`FaultSpec` drawn from ``random.Random(seed)``
(or written by hand for a focused scenario). The seed fixes the kinds, the
roles they target (the leader of partition 2, the active controller, ...),
the hold times and the quiet gaps; which node holds a role is looked up on
the live cluster when the fault starts. Real processes are not
deterministic, so a seed replays the same schedule, not the same
interleaving: a failure's history (JSON lines) is the exact record.

One fault at a time, so every unavailability window has one cause.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass

from tests.fault.cluster import RAFT_PORT, SESSION_TIMEOUT_S, FaultCluster
from tests.fault.history import History

KINDS = (
    "kill-leader",      # kill -9 the leader of a partition, restart it after the hold
    "kill-follower",    # kill -9 a follower of a partition
    "kill-controller",  # kill -9 the active controller (raft leader)
    "pause-long",       # SIGSTOP longer than the session timeout: fenced, then SIGCONT
    "pause-short",      # SIGSTOP shorter than the session timeout: should go unnoticed
    "isolate",          # cut one node from both peers, every protocol, both ways
    "cut-one-way",      # drop packets from one node to another, not back
    "cut-pair",         # cut two nodes from each other both ways (the third sees both)
    "cut-raft",         # cut only the controller's raft UDP traffic, both ways, from both peers
    "kill-all",         # kill -9 every node at once (a whole-cluster crash; files survive), restart all
)
#: What a random schedule draws from: every kind (``kill-all`` was left out while
#: finding 1 in ``test_findings.py`` stood).
DEFAULT_KINDS = KINDS
ROLES = ("leader", "follower", "controller", "any")


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    hold_s: float
    gap_s: float  # quiet time after healing, before the next fault
    partition: int = 0  # whose leader/follower a role names
    role: str = "leader"  # the node the fault targets (src of a one-way cut)
    other_role: str = "follower"  # the second node of a cut
    pick: float = 0.0  # which candidate when a role has several (followers, "any")


def random_schedule(rng: random.Random, duration_s: float, partitions: int,
                    kinds: tuple[str, ...] = DEFAULT_KINDS) -> list[FaultSpec]:
    """Faults until ``duration_s`` of holds and gaps are used up."""
    out: list[FaultSpec] = []
    used = 0.0
    while used < duration_s:
        kind = rng.choice(kinds)
        if kind == "pause-long":
            hold = round(SESSION_TIMEOUT_S * rng.uniform(1.5, 3.0), 2)
        elif kind == "pause-short":
            hold = round(SESSION_TIMEOUT_S * rng.uniform(0.1, 0.4), 2)
        else:
            hold = round(rng.uniform(2.0, 12.0), 2)
        gap = round(rng.uniform(2.0, 8.0), 2)
        role = {"kill-leader": "leader", "kill-follower": "follower",
                "kill-controller": "controller", "cut-raft": "controller"}.get(kind) or rng.choice(ROLES)
        other = rng.choice([r for r in ROLES if r != role])
        out.append(FaultSpec(kind, hold, gap, rng.randrange(partitions), role, other, rng.random()))
        used += hold + gap
    return out


class Nemesis:
    """Starts and heals faults on a :class:`FaultCluster`, writing both into the history."""

    def __init__(self, fc: FaultCluster, hist: History) -> None:
        self.fc = fc
        self.hist = hist
        self.count = 0

    def resolve(self, role: str, partition: int, pick: float, exclude: tuple[int, ...] = ()) -> int:
        """The node playing ``role`` now; a random running node when the role has no holder."""
        running = [n for n in self.fc.ids if self.fc.node(n).alive and n not in exclude]
        holder: int | None = None
        if role == "leader":
            holder = self.fc.leader_of(partition)
        elif role == "controller":
            holder = self.fc.controller()
        elif role == "follower":
            lead = self.fc.leader_of(partition)
            followers = [n for n in running if n != lead]
            holder = _pick(followers, pick) if followers else None
        if holder is None or holder not in running:
            holder = _pick(running, pick)
        return holder

    def start(self, spec: FaultSpec) -> Callable[[], None]:
        """Break something now; returns the function that heals it."""
        self.count += 1
        fault = self.count
        fc = self.fc
        k = spec.kind
        target = self.resolve(spec.role, spec.partition, spec.pick)
        other = self.resolve(spec.other_role, spec.partition, 1 - spec.pick, exclude=(target,)) \
            if k.startswith("cut-") else None
        peers = [n for n in fc.ids if n != target]
        detail: dict[str, object] = {"target": target}
        heal: Callable[[], None]
        if k in ("kill-leader", "kill-follower", "kill-controller"):
            fc.kill(target)
            heal = lambda: fc.restart(target)  # noqa: E731
        elif k.startswith("pause-"):
            fc.pause(target)
            heal = lambda: fc.resume(target)  # noqa: E731
        elif k == "isolate":
            fc.net.isolate(target, peers)
            heal = fc.net.heal
        elif k == "cut-one-way" and other is not None:
            fc.net.cut(target, other)
            detail["other"] = other
            heal = fc.net.heal
        elif k == "cut-pair" and other is not None:
            fc.net.cut_both(target, other)
            detail["other"] = other
            heal = fc.net.heal
        elif k == "kill-all":
            for n in fc.ids:
                fc.kill(n)
            heal = fc.heal_all
        elif k == "cut-raft":
            fc.net.isolate(target, peers, udp_port=RAFT_PORT)
            heal = fc.net.heal
        else:
            raise ValueError(f"unknown fault kind {k!r}")
        self.hist.add("fault-start", fault=fault, kind=k, **detail, spec=asdict(spec))

        def healed() -> None:
            heal()
            self.hist.add("fault-end", fault=fault, kind=k)

        return healed


def _pick(nodes: list[int], pick: float) -> int:
    return nodes[min(int(pick * len(nodes)), len(nodes) - 1)]
