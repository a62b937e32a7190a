"""Cost of the dashboard's sampler and aggregation on one node with many partitions.

    python -m bench.dashboard_bench [--partitions 2000] [--seconds 10]

Starts a standalone node, creates a topic of N partitions, appends to every
partition (so each gets a history ring), then prints medians of: the
sampler's one-second pass (as the node measures it), the internal state
report (latency, size), the dashboard snapshot (latency, size) and the node's
resident memory before and after the rings exist. Numbers, never assertions.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from app.client import Client
from tests.support.node import NodeProcess

SECRET = "bench-secret"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn: object, n: int, pause_s: float = 0.0) -> tuple[float, int]:
    """Median ms of ``n`` calls of ``fn`` (returning bytes) and the last body size."""
    times, size = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        body = fn()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) * 1000)
        size = len(body)
        if pause_s:
            time.sleep(pause_s)
    return statistics.median(times), size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        node = NodeProcess(Path(d) / "data", env={"TIDELOG_CLUSTER_SECRET": SECRET}).start()
        try:
            run(node, args.partitions, args.seconds)
        finally:
            node.kill()


def run(node: NodeProcess, partitions: int, seconds: int) -> None:
    auth = {"authorization": f"Bearer {SECRET}"}
    http = httpx.Client(base_url=node.url, timeout=60)
    with Client(node.url, timeout_s=120) as cl:
        cl.create_topic("bench", partitions=partitions)
    assert node.proc is not None
    time.sleep(3)  # let the first samples of the idle partitions happen
    idle_rss = rss_mb(node.proc.pid)
    idle_passes = sampler_passes(http, auth, seconds)
    with Client(node.url, timeout_s=120) as cl:
        for p in range(partitions):
            cl.produce("bench", [{"value": p}], partition=p, acks="leader")
    time.sleep(2)
    busy_rss = rss_mb(node.proc.pid)
    passes = sampler_passes(http, auth, seconds)
    stats = http.get("/internal/v1/dashboard/state", headers=auth).json()["sampler"]
    # 0.45 s apart: past the 400 ms cache, so every call builds a fresh report / snapshot.
    state_ms, state_b = timed(lambda: http.get("/internal/v1/dashboard/state", headers=auth).content, 10, 0.45)
    snap_ms, snap_b = timed(lambda: http.get("/v1/dashboard/snapshot").content, 10, 0.45)
    cached_ms, _ = timed(lambda: http.get("/v1/dashboard/snapshot").content, 10)
    desc_ms, _ = timed(lambda: http.get("/v1/topics/bench/partitions/0").content, 20)
    print(f"partitions: {partitions}, sampler rings: {stats['rings']}, samples kept: {stats['capacity']}")
    print(f"sampler pass, idle partitions (no rings): median {statistics.median(idle_passes):.2f} ms, "
          f"max {max(idle_passes):.2f} ms")
    print(f"sampler pass, every partition with a ring: median {statistics.median(passes):.2f} ms, "
          f"max {max(passes):.2f} ms")
    print(f"node RSS: {idle_rss:.0f} MB idle → {busy_rss:.0f} MB with rings "
          f"({(busy_rss - idle_rss) * 1024 / max(1, stats['rings']):.1f} KB per ring)")
    print(f"internal state report (fresh, end to end): median {state_ms:.1f} ms, {state_b / 1024:.0f} KB")
    print(f"dashboard snapshot (fresh, end to end): median {snap_ms:.1f} ms, {snap_b / 1024:.0f} KB; "
          f"cached: median {cached_ms:.2f} ms")
    print(f"describe one partition: median {desc_ms:.2f} ms")


def sampler_passes(http: httpx.Client, auth: dict[str, str], seconds: int) -> list[float]:
    """The node's own measure of its last sampler pass, read once per second."""
    out = []
    for _ in range(seconds):
        time.sleep(1)
        out.append(http.get("/internal/v1/dashboard/state", headers=auth).json()["sampler"]["last_pass_us"] / 1000)
    return out


if __name__ == "__main__":
    main()
