"""Restart (load + replay) time of the raft metadata log against history length.

FINDINGS 13: raftos replays its whole log synchronously on restart (50k entries blocked
17-19 s). The adapter snapshots the applied state every ``max_log_entries`` entries and
drops the log prefix, so restart cost should depend on the state size, not on history.

For each history length N this builds a node's data directory through the adapter's own
apply + compaction code (``protocol.apply_committed``), without the network, then times
``RaftMetadataLog.start()`` of a single voter until it leads with its state current
(snapshot load + log load + replay of the tail + the election no-op). Prints medians.

usage: .venv/bin/python bench/raft_replay.py [--sizes 1000,10000,100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from replication.controller.raft import RaftMetadataLog, RaftSettings
from replication.controller.raft.machine import KeyValueMachine
from replication.controller.raft.protocol import RUNTIME, apply_committed
from replication.controller.raft.storage import CompactingLog, SnapshotStore

KEYS = 1_000  # distinct keys: the state stays ~1,000 topics/partitions big
BATCH = 1_000


def build_history(raft_dir: Path, n: int, max_log_entries: int | None) -> None:
    """Write ``n`` committed entries as a long-running node would have."""
    raft_dir.mkdir(parents=True)
    snapshots = SnapshotStore(raft_dir)
    log = CompactingLog(raft_dir)
    role = SimpleNamespace(
        log=log,
        state_machine=KeyValueMachine(),
        state=SimpleNamespace(snapshots=snapshots, waiters={}),
    )
    RUNTIME.max_log_entries = max_log_entries
    for start in range(0, n, BATCH):
        entries = [
            {
                "term": 1,
                "command": {
                    "op": "set",
                    "u": {f"partition/{i % KEYS}": {"leader": i % 3, "epoch": i, "isr": [1, 2, 3]}},
                    "rid": f"req-{i}",
                    "txn": f"t{i}",
                    "part": 0,
                    "parts": 1,
                },
            }
            for i in range(start, min(n, start + BATCH))
        ]
        log.append_many(entries)
        log.commit_index = log.last_log_index
        apply_committed(role)
    (raft_dir / "meta.json").write_text('{"term": 1, "voted_for": null}')


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def time_restart(data_dir: Path, max_log_entries: int | None) -> tuple[float, int]:
    addr = ("127.0.0.1", free_udp_port())
    settings = RaftSettings(
        node_id=1,
        raft_addr=addr,
        voters={1: addr},
        data_dir=data_dir,
        secret="bench",
        request_timeout_s=600,
        max_log_entries=max_log_entries,
    )
    log = RaftMetadataLog(settings)
    t0 = time.perf_counter()
    await log.start()
    elapsed = time.perf_counter() - t0
    assert log.is_leader and len(log.state()) == KEYS
    entries = int(log.status()["log_entries"])
    await log.stop()
    return elapsed, entries


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,50000,100000,200000")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-log-entries", type=int, default=1000)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"restart time of a single voter, {KEYS} keys of state, median of {args.runs} runs")
    print(f"{'entries':>9} {'mode':>18} {'median_ms':>10} {'min_ms':>8} {'log on disk':>12}")
    root = Path(tempfile.mkdtemp(prefix="raft-replay-"))
    try:
        for n in sizes:
            for label, limit in (("compacted", args.max_log_entries), ("no compaction", None)):
                node_dir = root / f"{label.replace(' ', '_')}-{n}"
                build_history(node_dir / "raft", n, limit)
                times, entries = [], 0
                for _ in range(args.runs):
                    # restart writes a no-op each time; rebuild-free: history only grows by 1
                    elapsed, entries = await time_restart(node_dir, limit)
                    times.append(elapsed * 1000)
                name = f"{label} ({limit})" if limit else label
                median_ms, min_ms = statistics.median(times), min(times)
                print(f"{n:>9} {name:>18} {median_ms:>10.1f} {min_ms:>8.1f} {entries:>12}", flush=True)
                shutil.rmtree(node_dir)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
