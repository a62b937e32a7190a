"""Controller benchmark on a local 3-node cluster (all voters, raftos on loopback).

    python -m bench.controller_bench [--runs 3] [--partitions 1000]

Prints medians of: time to create a topic of N partitions with RF=3 (the
request returns once the creating node has applied the metadata), and
controller failover time with N partitions in the image (kill -9 of the
active controller → first successful topic create through a survivor).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from app.client import Client, TidelogError
from tests.support.node import ClusterProcesses


def controller_of(c: ClusterProcesses, exclude: int | None = None) -> int | None:
    ids = set()
    for n in c.nodes:
        if n.alive:
            try:
                ids.add(httpx.get(f"{n.url}/v1/cluster", timeout=2).json()["controller"]["node_id"])
            except httpx.HTTPError:
                return None
    if len(ids) == 1:
        (only,) = ids
        return only if only not in (None, exclude) else None
    return None


def wait_controller(c: ClusterProcesses, exclude: int | None = None, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = controller_of(c, exclude)
        if got is not None:
            return got
        time.sleep(0.05)
    raise TimeoutError("no controller")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--failover-limit-s", type=float, default=120.0,
                    help="give up on one failover after this long (reported, counted as the limit)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tidelog-ctrl-bench-"))
    cluster = ClusterProcesses(base, 3, env={"TIDELOG_LOG_LEVEL": "warning"}).start()
    creates: list[float] = []
    failovers: list[float] = []
    try:
        ctrl = wait_controller(cluster)
        with Client(cluster.node(ctrl).url, timeout_s=120) as c:
            for i in range(args.runs):
                t0 = time.perf_counter()
                c.create_topic(f"bench-{i}", partitions=args.partitions, replication_factor=3)
                creates.append(time.perf_counter() - t0)
        for i in range(args.runs):
            ctrl = wait_controller(cluster)
            survivor = next(n for n in cluster.nodes if n.node_id != ctrl and n.alive)
            victim = cluster.node(ctrl)
            t0 = time.perf_counter()
            victim.kill()
            give_up = t0 + args.failover_limit_s
            with Client(survivor.url, timeout_s=10) as c:
                while time.perf_counter() < give_up:
                    try:
                        c.create_topic(f"failover-{i}", partitions=1, replication_factor=2)
                        break
                    except (TidelogError, httpx.HTTPError):
                        time.sleep(0.02)
                else:
                    print(f"failover {i}: no admin write succeeded within {args.failover_limit_s} s")
            failovers.append(time.perf_counter() - t0)
            victim.start(wait_ready_s=60)
    finally:
        cluster.kill_all()
    print(f"\ncontroller bench: 3 voters on loopback, {args.partitions} partitions RF=3, {args.runs} runs")
    print(f"create {args.partitions}-partition topic: median {statistics.median(creates) * 1000:.0f} ms "
          f"(runs: {', '.join(f'{x * 1000:.0f}' for x in creates)})")
    print(f"controller failover (kill -9 → next admin write ok): median "
          f"{statistics.median(failovers) * 1000:.0f} ms "
          f"(runs: {', '.join(f'{x * 1000:.0f}' for x in failovers)})")


if __name__ == "__main__":
    main()
