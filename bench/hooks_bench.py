"""Inbound webhook benchmark: deliveries/s into a topic through ``POST /v1/hooks/{topic}``.

    python -m bench.hooks_bench --runs 3 --duration 6

wrk sends pre-signed GitHub-style deliveries (HMAC in Lua is not available,
so the bodies and signatures are computed here and cycled by a Lua script).
Scenarios: unsigned deliveries; signed deliveries with distinct delivery ids
(verify + dedupe lookup + append + acks=all); the same deliveries replayed
(every one answered from the dedupe ledger). The plain single-record produce
of ``bench.run`` is run alongside as the yardstick, so the ratio shows what
the hook path costs. Medians of ``--runs``; the machine is shared, so the
numbers are a floor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

import httpx
import orjson

from app.hooks.signatures import github_signature
from bench.run import WrkResult, post_script, wrk
from tests.support.node import NodeProcess

SECRET = "bench-secret"


def deliveries_script(path: Path, url: str, topic: str, start: int, count: int) -> Path:
    """A wrk script cycling through ``count`` signed deliveries with ids ``start..``.

    The raw HTTP requests go to a data file (length-prefixed) that the script
    loads at start: a Lua source with tens of thousands of literals would
    exceed Lua's constant limit.
    """
    host = url.split("//", 1)[1]
    data = bytearray()
    for i in range(start, start + count):
        body = orjson.dumps({"action": "opened", "number": i, "repository": {"full_name": "o/r"}})
        req = (
            f"POST /v1/hooks/{topic} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: d-{i}\r\n"
            f"X-Hub-Signature-256: {github_signature(SECRET, body)}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        data += f"{len(req)}\n".encode() + req
    data_file = path.with_suffix(".requests")
    data_file.write_bytes(bytes(data))
    path.write_text(textwrap.dedent(f"""
        local reqs = {{}}
        local f = io.open("{data_file}", "rb")
        local all = f:read("*all")
        f:close()
        local pos = 1
        while pos <= #all do
          local nl = string.find(all, "\\n", pos, true)
          local n = tonumber(string.sub(all, pos, nl - 1))
          reqs[#reqs + 1] = string.sub(all, nl + 1, nl + n)
          pos = nl + n + 1
        end
        local i = 0
        request = function()
          i = i + 1
          if i > #reqs then i = 1 end
          return reqs[i]
        end
    """))
    return path


def median(rs: list[WrkResult]) -> tuple[float, float, float]:
    return (statistics.median(r.requests_per_s for r in rs), statistics.median(r.p50_ms for r in rs),
            statistics.median(r.p99_ms for r in rs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=6, help="seconds per wrk run")
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--pool", type=int, default=60_000, help="distinct signed deliveries per run")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed (./dev bench installs it with apt)")
    tmp = Path(tempfile.mkdtemp(prefix="tidelog-hooks-bench-"))
    node = NodeProcess(tmp / "node", env={"TIDELOG_LOG_LEVEL": "warning"}).start()
    rows: list[tuple[str, float, float, float]] = []
    try:
        with httpx.Client(base_url=node.url, timeout=30) as http:
            for t in ("plain", "unsigned", "signed"):
                http.post("/v1/topics", json={"name": t, "partitions": 1}).raise_for_status()
            http.put("/v1/hooks/signed/config",
                     json={"signature": {"scheme": "github", "secrets": [SECRET]}}).raise_for_status()
        c = args.connections
        single = post_script(tmp / "single.lua", orjson.dumps({"records": [{"value": {"action": "opened"}}]}))
        unsigned = post_script(tmp / "unsigned.lua", orjson.dumps({"action": "opened", "number": 1}))
        plain = [wrk(node.url + "/v1/topics/plain/partitions/0/records", single, args.duration, c)
                 for _ in range(args.runs)]
        rows.append(("single-record produce (yardstick)", *median(plain)))
        rs = [wrk(node.url + "/v1/hooks/unsigned", unsigned, args.duration, c) for _ in range(args.runs)]
        rows.append(("unsigned hook delivery", *median(rs)))
        new: list[WrkResult] = []
        replay: list[WrkResult] = []
        http = httpx.Client(base_url=node.url, timeout=30)

        def stored() -> int:
            return int(http.get("/v1/topics/signed").json()["partitions"][0]["high_watermark"])

        for run in range(args.runs):
            first = run * args.pool
            script = deliveries_script(tmp / f"signed{run}.lua", node.url, "signed", first, args.pool)
            before = stored()
            new.append(wrk(node.url, script, args.duration, c))
            got = stored() - before
            assert 0 < got < args.pool, f"the pool of {args.pool} ids ran out: raise --pool"
            # Replay exactly the ids just stored: every request must be answered as a duplicate.
            again = deliveries_script(tmp / f"replay{run}.lua", node.url, "signed", first, got)
            replay.append(wrk(node.url, again, args.duration, c))
        rows.append(("GitHub-signed, new delivery ids (dedupe on)", *median(new)))
        rows.append(("GitHub-signed, replayed ids (answered by dedupe)", *median(replay)))
        bad = [(n, r.non_2xx) for n, group in (("plain", plain), ("unsigned", rs), ("new", new), ("replay", replay))
               for r in group if r.non_2xx]
        assert not bad, f"non-2xx responses: {bad}"
        total = stored()
        ids: list[str] = []
        nxt = 0
        while nxt < total:
            page = http.get("/v1/topics/signed/partitions/0/records",
                            params={"offset": nxt, "max_records": 5000}).json()
            ids += [r["headers"]["tidelog-delivery-id"] for r in page["records"]]
            nxt = page["next_offset"]
        assert len(ids) == len(set(ids)) == total, "a delivery id was stored twice"
        http.close()
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\ntidelog inbound hooks bench: {os.cpu_count()} cores, {args.connections} connections, "
          f"acks=all, median of {args.runs} x {args.duration}s wrk runs")
    print(f"{'scenario':<52} {'req/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'vs produce':>10}")
    base = rows[0][1]
    for name, rps, p50, p99 in rows:
        print(f"{name:<52} {rps:>10,.0f} {p50:>8.2f} {p99:>8.2f} {rps / base:>10.2f}")
    print(f"signed deliveries stored: {total}; replaying them stored nothing")


if __name__ == "__main__":
    main()
