"""Replication benchmark: RF=3 acks=all on a local 3-node cluster, medians printed.

    python -m bench.replication_bench --runs 3 --duration 8

* batched produce (1000 records/request, acks=all, 4 connections): records/s;
* single-record produce acks=all at light load (1 connection): p50/p99;
* single-record produce acks=all, 32 connections: throughput and latency;
* failover: SIGKILL the leader of a partition (not the controller's node, so
  this measures the data plane: suspicion → election → followers truncate and
  refetch) → first acknowledged acks=all produce through a survivor. The
  killed node is restarted and the partition re-synced between runs.

wrk (C) drives the produce scenarios against the partition leader directly;
the three nodes and wrk share this machine's cores, so numbers are a floor.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from app.client import Client, TidelogError
from bench.run import VALUE, post_script, wrk
from tests.support.node import ClusterProcesses

ENV = {
    "TIDELOG_LOG_LEVEL": "warning",
    "TIDELOG_HEARTBEAT_INTERVAL_MS": "200",
    "TIDELOG_SESSION_TIMEOUT_MS": "2000",
    "TIDELOG_LEADER_TIMEOUT_MS": "600",
    "TIDELOG_ELECTION_TIMEOUT_MS": "2000",
    "TIDELOG_REPLICA_LAG_TIME_MS": "5000",
    "TIDELOG_METADATA_WAIT_MS": "2000",
    "TIDELOG_FSYNC_POLICY": "interval",
}


def _wait(fn: Any, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except (httpx.HTTPError, TidelogError, KeyError):
            pass
        time.sleep(0.05)
    raise TimeoutError(str(fn))


def _state(c: ClusterProcesses, topic: str, p: int) -> dict[str, Any] | None:
    views = []
    for n in c.nodes:
        if n.alive:
            with contextlib.suppress(httpx.HTTPError):
                views.append(httpx.get(f"{n.url}/v1/topics/{topic}/partitions/{p}", timeout=2).json())
    if not views:
        return None
    newest = max(views, key=lambda v: v["leader_epoch"])
    if newest["leader"] is None or not c.node(newest["leader"]).alive:
        return None
    s = httpx.get(f"{c.node(newest['leader']).url}/v1/topics/{topic}/partitions/{p}", timeout=2).json()
    return s if s["leader_epoch"] == newest["leader_epoch"] and s["lrs"] else None


def _controller(c: ClusterProcesses) -> int:
    return int(_wait(lambda: httpx.get(f"{c.node(1).url}/v1/cluster", timeout=2)
                     .json()["controller"]["node_id"]))


def _create(c: ClusterProcesses, topic: str, partitions: int = 1) -> list[dict[str, Any]]:
    with c.node(1).client() as cl:
        cl.create_topic(topic, partitions=partitions, replication_factor=3,
                        config={"min_insync_replicas": 2})
    return [
        _wait(lambda p=p: (s := _state(c, topic, p)) and len(s["isr"]) == 3 and s)
        for p in range(partitions)
    ]


def failover_once(c: ClusterProcesses, topic: str) -> float:
    """Seconds from SIGKILL of a partition leader to the first acked acks=all produce."""
    ctrl = _controller(c)
    states = _create(c, topic, partitions=3)
    st = next(s for s in states if s["leader"] != ctrl)
    p, victim = st["partition"], c.node(st["leader"])
    entry = next(n for n in c.nodes if n is not victim)
    with Client(entry.url) as cl:
        for i in range(100):
            cl.produce(topic, [{"value": i}], partition=p)
    victim.kill()
    t0 = time.monotonic()
    with Client(entry.url, timeout_s=10) as cl:
        while True:
            try:
                cl.produce(topic, [{"value": "after"}], partition=p, timeout_ms=2000)
                elapsed = time.monotonic() - t0
                break
            except (httpx.HTTPError, TidelogError):
                time.sleep(0.005)
    victim.start()
    _wait(lambda: (s := _state(c, topic, p)) and len(s["isr"]) == 3)
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=8, help="seconds per wrk run")
    ap.add_argument("--failovers", type=int, default=5)
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed")
    tmp = Path(tempfile.mkdtemp(prefix="tidelog-rbench-"))
    c = ClusterProcesses(tmp, 3, env=ENV)
    c.start()
    rows: list[tuple[str, float, float, float, float]] = []
    failovers: list[float] = []
    try:
        _controller(c)
        [sb] = _create(c, "rbatch")
        [ss] = _create(c, "rsingle")
        batch = orjson.dumps(
            {"records": [{"key": f"k{i % 100}", "value": VALUE} for i in range(1000)]}
        )
        single = orjson.dumps({"records": [{"key": "k", "value": VALUE}]})
        s_batch = post_script(tmp / "batch.lua", batch)
        s_single = post_script(tmp / "single.lua", single)
        ub = f"{c.node(sb['leader']).url}/v1/topics/rbatch/partitions/0/records?acks=all"
        us = f"{c.node(ss['leader']).url}/v1/topics/rsingle/partitions/0/records?acks=all"
        scenarios = [
            ("batched produce acks=all RF=3 (1000 rec/req, 4 conns)", ub, s_batch, 4, 1000),
            ("single-record acks=all RF=3, 1 conn (light load)", us, s_single, 1, 1),
            ("single-record acks=all RF=3, 32 conns", us, s_single, 32, 1),
        ]
        for name, url, script, conns, per_req in scenarios:
            rs = [wrk(url, script, args.duration, conns) for _ in range(args.runs)]
            assert all(r.non_2xx == 0 for r in rs), f"{name}: non-2xx responses"
            rps = statistics.median(r.requests_per_s for r in rs)
            rows.append((name, rps, rps * per_req, statistics.median(r.p50_ms for r in rs),
                         statistics.median(r.p99_ms for r in rs)))
        for i in range(args.failovers):
            failovers.append(failover_once(c, f"failover{i}"))
    finally:
        c.kill_all()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ntidelog replication bench: 3 nodes + wrk on {os.cpu_count()} cores, "
          f"median of {args.runs} x {args.duration}s wrk runs")
    print(f"{'scenario':<56} {'req/s':>9} {'records/s':>11} {'p50 ms':>7} {'p99 ms':>7}")
    for name, rps, recs, p50, p99 in rows:
        print(f"{name:<56} {rps:>9,.0f} {recs:>11,.0f} {p50:>7.2f} {p99:>7.2f}")
    print(f"failover (leader SIGKILL -> first acked acks=all produce): median "
          f"{statistics.median(failovers):.2f} s over {len(failovers)} runs "
          f"({', '.join(f'{x:.2f}' for x in failovers)})")


if __name__ == "__main__":
    main()
