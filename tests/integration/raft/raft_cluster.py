"""Start raft nodes as real processes on 127.0.0.1 UDP and talk to them over pipes.

Ported from the evaluation's shared/raftos/cluster.py; every wait polls with a deadline.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MAIN = HERE / "raft_node_main.py"
REPO = HERE.parents[2]


def free_udp_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


class NodeProcess:
    def __init__(self, node_id: int, voters: str, data_dir: Path, extra: list[str]) -> None:
        self.node_id = node_id
        self.stderr_path = data_dir.parent / f"node{node_id}.stderr"
        cmd = [sys.executable, str(MAIN), "--node-id", str(node_id), "--voters", voters]
        cmd += ["--data-dir", str(data_dir), *extra]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=REPO,
        )
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self._replies.get(timeout=30)
        assert ready.get("ready"), ready

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._replies.put(json.loads(line))
        self._replies.put({"id": -1, "ok": False, "error": "process exited"})

    def call(self, op: str, timeout_s: float = 20.0, **kw: Any) -> dict[str, Any]:
        """One request, waiting for its reply at most ``timeout_s``."""
        with self._lock:
            rid = next(self._ids)
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps({"id": rid, "op": op, **kw}) + "\n").encode())
            self.proc.stdin.flush()
            deadline = time.monotonic() + timeout_s
            while True:
                reply = self._replies.get(timeout=max(0.01, deadline - time.monotonic()))
                if reply["id"] in (rid, -1):
                    return reply

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, like a crash."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._stderr.close()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class RaftCluster:
    def __init__(self, root: Path, n: int = 3, extra: list[str] | None = None) -> None:
        self.root = root
        self.ids = list(range(1, n + 1))
        self.ports = dict(zip(self.ids, free_udp_ports(n), strict=True))
        self.voters = ",".join(f"{i}=127.0.0.1:{p}" for i, p in self.ports.items())
        self.extra = extra or []
        self.nodes: dict[int, NodeProcess] = {}

    def data_dir(self, node_id: int) -> Path:
        return self.root / f"node{node_id}"

    def start(self, *node_ids: int, extra: list[str] | None = None) -> None:
        for i in node_ids or self.ids:
            self.nodes[i] = NodeProcess(i, self.voters, self.data_dir(i), self.extra + (extra or []))

    def kill(self, node_id: int) -> None:
        self.nodes.pop(node_id).kill()

    def stop(self) -> None:
        for i in list(self.nodes):
            self.kill(i)

    def statuses(self) -> dict[int, dict[str, Any]]:
        return {i: n.call("status", timeout_s=10) for i, n in self.nodes.items()}

    def wait_leader(self, deadline_s: float = 30.0, exclude: tuple[int, ...] = ()) -> int:
        """Poll until one running node leads with its state current; return its id."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            leaders = [i for i, s in self.statuses().items() if s.get("is_leader")]
            leaders = [i for i in leaders if i not in exclude]
            if len(leaders) == 1:
                return leaders[0]
            time.sleep(0.05)
        raise AssertionError(f"no leader within {deadline_s}s: {self.statuses()}")

    def propose(self, updates: dict[str, Any], request_id: str | None = None, deadline_s: float = 30.0) -> int:
        """Propose on whoever leads, retrying NotLeader during elections."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            leader = self.wait_leader(max(1.0, end - time.monotonic()))
            reply = self.nodes[leader].call("propose", updates=updates, request_id=request_id)
            if reply["ok"]:
                return int(reply["index"])
            time.sleep(0.05)
        raise AssertionError("proposal did not commit in time")

    def propose_many(self, count: int, keys: int, deadline_s: float = 120.0) -> None:
        """``count`` sequential proposals (seq=i, k{i % keys}=i), resuming on whoever leads
        after an election (request ids make a resumed proposal idempotent)."""
        done = 0
        end = time.monotonic() + deadline_s
        while done < count:
            assert time.monotonic() < end, f"only {done}/{count} proposals in {deadline_s}s"
            leader = self.wait_leader(max(1.0, end - time.monotonic()))
            reply = self.nodes[leader].call("propose_many", count=count, keys=keys, start=done, timeout_s=deadline_s)
            done = int(reply.get("done", done))

    def wait_converged(self, deadline_s: float = 30.0) -> dict[str, Any]:
        """Poll until every running node has applied the same state; return it."""
        end = time.monotonic() + deadline_s
        last: dict[int, Any] = {}
        while time.monotonic() < end:
            last = {i: n.call("state", timeout_s=10)["state"] for i, n in self.nodes.items()}
            states = list(last.values())
            if all(s == states[0] for s in states):
                return states[0]  # type: ignore[no-any-return]
            time.sleep(0.1)
        raise AssertionError(f"states did not converge within {deadline_s}s: {last}")

    def stderr(self, node_id: int) -> str:
        return (self.root / f"node{node_id}.stderr").read_text(errors="replace")
