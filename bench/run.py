"""Single-node benchmark: starts a node, drives it with wrk, prints medians.

    ./dev bench            (or: python -m bench.run --runs 3 --duration 10)

wrk (C, from Debian) generates the load so the client is not the
bottleneck; each scenario runs ``--runs`` times and the median is printed.
The node and wrk share this machine's cores, so numbers are a floor.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import orjson

from app.client import Client
from tests.support.node import NodeProcess

VALUE = "x" * 60  # with key and JSON framing a record is ~100 B on the wire


@dataclass
class WrkResult:
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    non_2xx: int


def _ms(text: str) -> float:
    m = re.match(r"([\d.]+)(us|ms|s)", text)
    if not m:
        return float("nan")
    v, unit = float(m.group(1)), m.group(2)
    return v / 1000 if unit == "us" else v * 1000 if unit == "s" else v


def wrk(url: str, script: Path, duration_s: int, connections: int, threads: int = 1) -> WrkResult:
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration_s}s", "--latency",
         "-s", str(script), url],
        capture_output=True, text=True, check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return WrkResult(rps, p50, p99, int(m.group(1)) if m else 0)


def post_script(path: Path, body: bytes) -> Path:
    body_file = path.with_suffix(".body")
    body_file.write_bytes(body)
    path.write_text(textwrap.dedent(f"""
        local f = io.open("{body_file}", "rb")
        wrk.body = f:read("*all")
        f:close()
        wrk.method = "POST"
        wrk.headers["Content-Type"] = "application/json"
    """))
    return path


def fetch_script(path: Path, base: str, max_offset: int, max_records: int) -> Path:
    path.write_text(textwrap.dedent(f"""
        math.randomseed(42)
        request = function()
          local off = math.random(0, {max_offset})
          return wrk.format("GET", "{base}?offset=" .. off .. "&max_records={max_records}&max_bytes=16777216")
        end
    """))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=8, help="seconds per wrk run")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (./dev bench installs it with apt)")
    tmp = Path(tempfile.mkdtemp(prefix="tidelog-bench-"))
    node = NodeProcess(tmp / "node", env={"TIDELOG_LOG_LEVEL": "warning"})
    node.start()
    try:
        with node.client() as c:
            c.create_topic("batch", 1)
            c.create_topic("single", 1)
        batch = orjson.dumps(
            {"records": [{"key": f"k{i % 100}", "value": VALUE} for i in range(1000)]}
        )
        single = orjson.dumps({"records": [{"key": "k", "value": VALUE}]})
        s_batch = post_script(tmp / "batch.lua", batch)
        s_single = post_script(tmp / "single.lua", single)
        u = node.url + "/v1/topics/{}/partitions/0/records?acks={}"
        scenarios = [
            ("batched produce acks=leader (1000 rec/req)", u.format("batch", "leader"), s_batch, 4, 1000),
            ("batched produce acks=all (1000 rec/req)", u.format("batch", "all"), s_batch, 4, 1000),
            ("single-record produce acks=all, 32 conns", u.format("single", "all"), s_single, 32, 1),
            ("single-record produce acks=all, 1 conn (light load)", u.format("single", "all"), s_single, 1, 1),
        ]
        rows: list[tuple[str, float, float, float, float]] = []
        for name, url, script, conns, per_req in scenarios:
            rs = [wrk(url, script, args.duration, conns) for _ in range(args.runs)]
            assert all(r.non_2xx == 0 for r in rs), f"{name}: non-2xx responses"
            rps = statistics.median(r.requests_per_s for r in rs)
            rows.append((name, rps, rps * per_req,
                         statistics.median(r.p50_ms for r in rs),
                         statistics.median(r.p99_ms for r in rs)))
        with Client(node.url) as c:
            leo = c.fetch("batch", 0, "latest", isolation="uncommitted").next_offset
        for max_records in (1000, 5000):
            s_fetch = fetch_script(tmp / f"fetch{max_records}.lua",
                                   "/v1/topics/batch/partitions/0/records",
                                   max(0, leo - max_records - 1), max_records)
            rs = [wrk(node.url, s_fetch, args.duration, 4) for _ in range(args.runs)]
            rps = statistics.median(r.requests_per_s for r in rs)
            rows.append((f"fetch {max_records} rec/req, 4 conns", rps, rps * max_records,
                         statistics.median(r.p50_ms for r in rs),
                         statistics.median(r.p99_ms for r in rs)))
    finally:
        node.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ntidelog single-node bench: {os.cpu_count()} cores, median of {args.runs} x {args.duration}s wrk runs")
    print(f"{'scenario':<52} {'req/s':>10} {'records/s':>12} {'p50 ms':>8} {'p99 ms':>8}")
    for name, rps, recs, p50, p99 in rows:
        print(f"{name:<52} {rps:>10,.0f} {recs:>12,.0f} {p50:>8.2f} {p99:>8.2f}")


if __name__ == "__main__":
    main()
