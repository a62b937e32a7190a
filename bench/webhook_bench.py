"""Webhook benchmark: records/s a node pushes to a local receiver; medians printed.

    python -m bench.webhook_bench --runs 3 --records 50000

Outbound (push subscriptions), one function per scenario:

* ``outbound_backlog``: a backlog of ``--records`` ~100-byte records is
  produced first, then a subscription from ``earliest`` drains it; the time
  from creating the subscription to the receiver holding the last offset
  gives records/s and requests/s. Variants: batch size, signed requests
  (HMAC-SHA256 per request), several partitions (one worker each).

The receiver is a separate uvicorn process (so it does not share this
script's GIL) that answers 200 at once and tracks the highest
``Tidelog-Last-Offset`` per topic and partition; it never parses bodies, so it is
rarely the bottleneck. Node, receiver and this script share the machine's
cores: wall-clock numbers are a floor and swing with other load, so the node's
own CPU time is printed too (records per CPU second of the node process).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from app.client import Client
from tests.support.node import NodeProcess, free_port

ENV = {
    "TIDELOG_LOG_LEVEL": "warning",
    "TIDELOG_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
}
VALUE = {"user": "u-123456", "event": "page_view", "path": "/products/42", "ms": 1234}  # ~100 B stored
_names = itertools.count()

# ---- the receiver (ASGI, run by uvicorn in its own process) -------------------------------
_progress: dict[str, int] = {}
_requests = [0]


async def receiver_app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":  # progress, for the bench driver
        body = orjson.dumps({"last_offsets": _progress, "requests": _requests[0]})
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    more = True
    while more:
        msg = await receive()
        more = msg.get("more_body", False)
    headers = dict(scope["headers"])
    key = headers.get(b"tidelog-topic", b"").decode() + "/" + headers.get(b"tidelog-partition", b"").decode()
    last = int(headers.get(b"tidelog-last-offset", b"-1"))
    _progress[key] = max(_progress.get(key, -1), last)
    _requests[0] += 1
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


class ReceiverProcess:
    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "bench.webhook_bench:receiver_app", "--host", "127.0.0.1",
             "--port", str(self.port), "--log-level", "warning", "--no-access-log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url, timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise TimeoutError("receiver did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def progress(self) -> dict[str, Any]:
        d: dict[str, Any] = httpx.get(self.url, timeout=5).json()
        return d

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- scenarios ---------------------------------------------------------------------------
def _backlog(node: NodeProcess, topic: str, partitions: int, records: int) -> None:
    per = records // partitions
    with Client(node.url, timeout_s=120) as c:
        c.create_topic(topic, partitions=partitions)
        for p in range(partitions):
            for i in range(0, per, 5000):
                c.produce(topic, [{"value": VALUE} for _ in range(min(5000, per - i))], partition=p, acks="leader")


def outbound_backlog(node: NodeProcess, receiver: ReceiverProcess, *, records: int, batch_size: int,
                     partitions: int = 1, signed: bool = False) -> tuple[float, float, float]:
    """Drain a backlog through one subscription; returns (records/s, requests/s, records per
    CPU second of the node: steadier than wall time when other work shares the cores)."""
    topic = f"wh-bench-{next(_names)}"
    _backlog(node, topic, partitions, records)
    per = records // partitions
    req0 = receiver.progress()["requests"]
    body: dict[str, Any] = {"id": topic, "topic": topic, "url": receiver.url, "start": "earliest",
                            "batch_size": batch_size, "max_batch_bytes": 16 << 20, "paused": True}
    if signed:
        body["secret"] = "bench-secret-0123456789"
    httpx.post(f"{node.url}/v1/subscriptions", json=body, timeout=30).raise_for_status()
    assert node.proc is not None
    cpu0 = cpu_s(node.proc.pid)
    t0 = time.perf_counter()  # from resume: the dead-letter topic's creation is not timed
    httpx.post(f"{node.url}/v1/subscriptions/{topic}/resume", timeout=30).raise_for_status()
    deadline = time.monotonic() + 600
    # Poll the receiver (its own process), not the node: status requests would take CPU
    # from the delivery being measured.
    while True:
        last = receiver.progress()["last_offsets"]
        if all(last.get(f"{topic}/{p}", -1) >= per - 1 for p in range(partitions)):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: not drained: {last}")
        time.sleep(0.01)
    elapsed = time.perf_counter() - t0
    cpu = cpu_s(node.proc.pid) - cpu0
    requests = receiver.progress()["requests"] - req0
    httpx.delete(f"{node.url}/v1/subscriptions/{topic}", timeout=30)
    httpx.delete(f"{node.url}/v1/topics/{topic}", timeout=30)
    return records / elapsed, requests / elapsed, records / max(cpu, 1e-3)


SCENARIOS: list[tuple[str, dict[str, Any]]] = [
    ("backlog, batch 100, 1 partition", {"batch_size": 100}),
    ("backlog, batch 1000, 1 partition", {"batch_size": 1000}),
    ("backlog, batch 100, signed (HMAC)", {"batch_size": 100, "signed": True}),
    ("backlog, batch 100, 4 partitions", {"batch_size": 100, "partitions": 4}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=50_000)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="webhook-bench-"))
    node = NodeProcess(base / "node", env=ENV).start()
    receiver = ReceiverProcess()
    try:
        print(f"webhook bench: {args.records} records per run, {args.runs} runs, "
              f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        print(f"{'scenario':<36} {'records/s':>10} {'req/s':>7} {'rec/CPU-s':>10}   (medians; records/s of all runs)")
        for name, kw in SCENARIOS:
            runs = [outbound_backlog(node, receiver, records=args.records, **kw) for _ in range(args.runs)]
            recs = [r for r, _, _ in runs]
            med = [statistics.median(x) for x in zip(*runs, strict=True)]
            print(f"{name:<36} {med[0]:>10,.0f} {med[1]:>7,.0f} {med[2]:>10,.0f}   "
                  f"({', '.join(f'{r:,.0f}' for r in recs)})", flush=True)
    finally:
        receiver.stop()
        node.kill()


if __name__ == "__main__":
    main()
