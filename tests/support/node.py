"""Real ``tidelog serve`` processes on loopback for tests and benchmarks.

Each node gets a free port and its own data directory; ``kill()`` sends
SIGKILL (no clean shutdown, no flush), ``stop()`` SIGTERM, and ``start()``
on the same object restarts it on the same port and data directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from app.client import Client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NodeProcess:
    def __init__(
        self,
        data_dir: Path,
        *,
        node_id: int = 1,
        port: int | None = None,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        host: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
    ) -> None:
        """``host`` is the address it binds and advertises; ``command_prefix`` wraps the
        command line (``ip netns exec NS`` runs it in a network namespace; it execs, so
        ``proc.pid`` is still the node's own pid and signals reach it directly)."""
        self.data_dir = data_dir
        self.host = host
        self.command_prefix = tuple(command_prefix)
        self.node_id = node_id
        self.port = port or free_port()
        self.env = dict(env or {})
        self.log_path = log_path or data_dir.parent / f"node{node_id}-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client(self) -> Client:
        return Client(self.url)

    def start(self, wait_ready_s: float = 30.0) -> NodeProcess:
        """Start the process; wait for /readyz unless ``wait_ready_s`` is 0."""
        env = {
            **os.environ,
            "TIDELOG_NODE_ID": str(self.node_id),
            "TIDELOG_PORT": str(self.port),
            "TIDELOG_HOST": self.host,
            "TIDELOG_DATA_DIR": str(self.data_dir),
            "TIDELOG_LOG_LEVEL": "warning",
            **self.env,
        }
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [*self.command_prefix, sys.executable, "-m", "app.cli", "serve"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        if wait_ready_s > 0:
            self.wait_ready(wait_ready_s)
        return self

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"node exited with {self.proc.returncode}; log:\n{self.log_path.read_text()[-3000:]}"
                )
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"node not ready after {timeout_s}s; log:\n{self.log_path.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, like a crash (page cache survives)."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout_s: float = 15.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code.

        uvicorn re-raises the signal after a graceful shutdown, so a clean
        stop exits with -SIGTERM, not 0.
        """
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                raise
        return self.proc.returncode if self.proc else 0

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class ClusterProcesses:
    """N nodes, all controller voters, on free loopback ports (HTTP and raft UDP)."""

    def __init__(
        self,
        base_dir: Path,
        n: int = 3,
        env: Mapping[str, str] | None = None,
        observers: int = 0,
        hosts: Sequence[str] | None = None,
        command_prefixes: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """``n`` voters (ids 1..n), then ``observers`` brokers outside the voter set.

        ``hosts`` gives each node its own address (one network namespace each, see
        ``tests/fault/netns.py``) with ``command_prefixes`` to start it there; then the
        ports are fixed, since no two nodes share an address. Default: loopback, free ports.
        """
        self.secret = "test-secret-" + base_dir.name
        total = n + observers
        if hosts is None:
            hosts = ["127.0.0.1"] * total
            ports = [free_port() for _ in range(total)]
            raft_ports = [free_udp_port() for _ in range(n)]
        else:
            ports = [8080] * total
            raft_ports = [9001] * n
        prefixes = command_prefixes or [()] * total
        voters = ",".join(
            f"{i + 1}=http://{hosts[i]}:{ports[i]}@{hosts[i]}:{raft_ports[i]}" for i in range(n)
        )
        common = {
            "TIDELOG_VOTERS": voters,
            "TIDELOG_CLUSTER_SECRET": self.secret,
            **(env or {}),
        }
        self.nodes = [
            NodeProcess(base_dir / f"node{i + 1}", node_id=i + 1, port=ports[i], env=common,
                        host=hosts[i], command_prefix=prefixes[i])
            for i in range(total)
        ]

    def start(self, wait_ready_s: float = 60.0) -> ClusterProcesses:
        for n in self.nodes:
            n.start(wait_ready_s=0)  # start all before waiting: they need each other
        for n in self.nodes:
            n.wait_ready(wait_ready_s)
        return self

    def node(self, node_id: int) -> NodeProcess:
        return self.nodes[node_id - 1]

    def kill_all(self) -> None:
        for n in self.nodes:
            if n.alive:
                n.resume()
                n.kill()


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
