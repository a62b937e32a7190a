"""Idle cost of replication: CPU per node of a 3-node cluster holding N RF=3 partitions.

    python -m bench.idle_bench --partitions 1000 --window 20

Nothing is produced: what is measured is the steady cost of followers'
long-poll fetches, ISR checks, heartbeats, checkpoints and the dashboard
sampler. CPU time is read from ``/proc/<pid>/stat`` (user + system) over the
window, so other load on the machine does not inflate it much; the result is
in cores (1.0 = one core busy).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from tests.support.node import ClusterProcesses
from tests.support.waiting import eventually


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--settle", type=float, default=20.0, help="seconds to let the cluster settle first")
    ap.add_argument("--window", type=float, default=20.0, help="seconds of measurement")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tidelog-idle-"))
    c = ClusterProcesses(base, 3).start()
    try:
        def created() -> bool:
            with c.node(1).client() as cl:
                cl.create_topic("idle", partitions=args.partitions, replication_factor=3)
            return True

        eventually(created, timeout_s=120, what="the topic created")
        time.sleep(args.settle)  # a benchmark's warm-up, not a test wait
        pids = [n.proc.pid for n in c.nodes if n.proc is not None]
        before = [cpu_seconds(p) for p in pids]
        t0 = time.monotonic()
        time.sleep(args.window)
        after = [cpu_seconds(p) for p in pids]
        dt = time.monotonic() - t0
    finally:
        c.kill_all()
        shutil.rmtree(base, ignore_errors=True)
    cores = [(b - a) / dt for a, b in zip(before, after, strict=True)]
    print(f"\nidle 3-node cluster, {args.partitions} RF=3 partitions, {args.window:.0f} s window")
    print("CPU per node (cores): " + ", ".join(f"{x:.3f}" for x in cores))
    print(f"per 1,000 partitions per node: {1000 * sorted(cores)[1] / args.partitions:.3f} cores (median node)")


if __name__ == "__main__":
    main()
