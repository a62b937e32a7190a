"""One fault run end to end: cluster, workload, faults, heal, settle, final read, verdict.

The order matters for what the checker can claim:
1. the workload runs before the first fault, so every partition has acks to lose;
2. faults run one at a time, each healed before the quiet gap that follows it,
   and the next one starts only once the cluster is healthy again;
3. after the last heal the cluster must become healthy (every node up, every
   replica in sync) and every partition must acknowledge a write again; not
   getting there within ``settle_timeout_s`` (after any fault) is a liveness
   failure, which records every node's view of the cluster and the topic into
   the history (``stuck``) and ends the schedule early;
4. producers stop, each partition is read in full (committed) through every
   node in turn, and consumers are given until they reach the end;
5. the checker judges the history; the history, the summary, ``report.json``
   (every violation and every unavailability window with its start, end and
   fault) and the node logs stay in ``artifacts`` whatever the outcome.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.fault.checker import Report, check
from tests.fault.cluster import FaultCluster
from tests.fault.history import History
from tests.fault.nemesis import DEFAULT_KINDS, FaultSpec, Nemesis, random_schedule
from tests.fault.scenarios import SCENARIOS
from tests.fault.summary import render
from tests.fault.workload import Consumer, Producer, read_partition


@dataclass
class RunConfig:
    seed: int
    artifacts: Path
    duration_s: float = 60.0
    partitions: int = 3
    rate_hz: float = 20.0  # per partition; bounded so 2 shared cores keep up
    kinds: tuple[str, ...] = DEFAULT_KINDS
    scenario: str | None = None  # a focused scenario (scenarios.py) instead of a random schedule
    warmup_acks: int = 20
    settle_timeout_s: float = 90.0
    gap_s: float = 1.0  # an ack gap longer than this is an unavailability window

    def faults(self) -> list[FaultSpec]:
        if self.scenario is not None:
            return SCENARIOS[self.scenario]
        return random_schedule(random.Random(self.seed), self.duration_s, self.partitions, self.kinds)


@dataclass
class RunResult:
    config: RunConfig
    report: Report
    summary: str
    elapsed_s: float
    liveness: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.liveness


def run(cfg: RunConfig) -> RunResult:
    cfg.artifacts.mkdir(parents=True, exist_ok=True)
    hist = History(cfg.artifacts / "history.jsonl")
    schedule = cfg.faults()
    hist.add("run", seed=cfg.seed, duration_s=cfg.duration_s, partitions=cfg.partitions,
             scenario=cfg.scenario, schedule=[asdict(s) for s in schedule])
    fc = FaultCluster(cfg.artifacts / "cluster", partitions=cfg.partitions)
    liveness: list[str] = []
    stop_producers, stop_consumers = threading.Event(), threading.Event()
    producers: list[Producer] = []
    consumers: list[Consumer] = []
    started = time.monotonic()
    try:
        fc.start()
        hist.add("cluster-ready", net=fc.net.tag, hosts=[fc.net.host(n) for n in fc.ids])
        urls = [fc.url(n) for n in fc.ids]
        producers = [Producer(hist, fc.topic, p, urls, stop_producers, cfg.rate_hz) for p in range(cfg.partitions)]
        consumers = [Consumer(hist, fc.topic, p, urls, stop_consumers) for p in range(cfg.partitions)]
        for w in [*producers, *consumers]:
            w.start()
        _wait_acks(hist, cfg.partitions, cfg.warmup_acks, 60.0, liveness, "warm-up")
        nemesis = Nemesis(fc, hist)
        for spec in schedule:
            heal = nemesis.start(spec)
            try:
                _hold(spec.hold_s, [*producers, *consumers])
            finally:
                heal()
            _hold(spec.gap_s, [*producers, *consumers])
            # One fault at a time: the next starts only once this one is fully repaired.
            try:
                fc.wait_healthy(cfg.settle_timeout_s)
                hist.add("healthy", fault=nemesis.count)
            except AssertionError as e:
                liveness.append(f"not healthy {cfg.settle_timeout_s:.0f}s after fault {nemesis.count}: {e}")
                hist.add("stuck", fault=nemesis.count, views=fc.views())
                break  # the rest of the schedule would measure nothing; keep the state for analysis
        fc.heal_all()
        hist.add("healed")
        if not liveness:
            try:
                fc.wait_healthy(cfg.settle_timeout_s)
                hist.add("settled")
            except AssertionError as e:
                liveness.append(f"cluster not healthy {cfg.settle_timeout_s:.0f}s after healing: {e}")
                hist.add("stuck", fault=None, views=fc.views())
            _wait_acks(hist, cfg.partitions, 1, cfg.settle_timeout_s, liveness, "recovery", since=hist.now())
        stop_producers.set()
        for w in producers:
            w.join(30)
        _final_reads(fc, hist, cfg.partitions, liveness)
        _drain(consumers, hist, 30.0)
    finally:
        stop_producers.set()
        stop_consumers.set()
        for w in [*producers, *consumers]:
            w.join(15)
        fc.close()
        hist.close()
    for w in [*producers, *consumers]:
        if w.error is not None:
            liveness.append(f"{w.name} crashed: {w.error!r}")
    report = check(hist.events, cfg.partitions, cfg.gap_s)
    elapsed = time.monotonic() - started
    summary = render(cfg, report, liveness, elapsed)
    (cfg.artifacts / "summary.txt").write_text(summary)
    (cfg.artifacts / "report.json").write_bytes(orjson.dumps(
        {"seed": cfg.seed, "ok": report.ok and not liveness, "problems": [*report.notes, *liveness],
         "faults": report.faults, "partitions": [asdict(p) for p in report.partitions]},
        option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    return RunResult(cfg, report, summary, elapsed, liveness)


def _hold(seconds: float, workers: list[Any]) -> None:
    """Let a fault (or a quiet gap) last; wakes early only if a workload thread died."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if any(not w.is_alive() for w in workers):
            return
        time.sleep(min(left, 0.1))


def _wait_acks(hist: History, partitions: int, n: int, timeout_s: float, liveness: list[str],
               what: str, since: float = 0.0) -> None:
    """Wait until every partition has ``n`` acks after ``since``; a liveness note otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        counts = [0] * partitions
        for e in hist.of_type("ok"):
            if e["t"] >= since:
                counts[e["partition"]] += 1
        if min(counts) >= n:
            hist.add(f"{what}-done")
            return
        time.sleep(0.1)
    liveness.append(f"{what}: some partition had fewer than {n} acks after {timeout_s:.0f}s")


def _final_reads(fc: FaultCluster, hist: History, partitions: int, liveness: list[str]) -> None:
    """Read every partition fully through each node; the reads must agree (one log).

    A later read may be longer than an earlier one (a write whose ack timed out can
    still commit), never different: the longest is the final log.
    """
    for p in range(partitions):
        reads: dict[int, list[list[Any]]] = {}
        for node in fc.ids:
            try:
                reads[node] = read_partition(fc.url(node), fc.topic, p)
            except Exception as e:  # any failure here is a finding, recorded
                liveness.append(f"final read of partition {p} through node {node} failed: {e!r}")
        if not reads:
            continue
        longest = max(reads.values(), key=len)
        hist.add("final", partition=p, records=longest)
        for node, recs in reads.items():
            if recs != longest[: len(recs)]:
                liveness.append(f"partition {p}: final read through node {node} disagrees with another "
                                f"({len(recs)} vs {len(longest)} records)")


def _drain(consumers: list[Consumer], hist: History, timeout_s: float) -> None:
    """Give consumers until they reach each partition's final length (checked, not asserted)."""
    finals = {e["partition"]: len(e["records"]) for e in hist.of_type("final")}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(c.next_offset >= finals.get(c.partition, 0) for c in consumers):
            break
        time.sleep(0.1)
    hist.add("consumers-done", next_offsets={c.partition: c.next_offset for c in consumers})
