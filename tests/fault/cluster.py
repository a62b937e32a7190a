"""Three ``tidelog serve`` voters, each in its own network namespace, and the verbs faults need.

Timeouts are short (session 3 s, replica lag 3 s, leader suspicion 2 s, the
same as ``tests/integration/replication``) so a failover costs seconds and a
CI scenario stays short; forwarding gives up after 5 s so a request sent to a
node whose leader is unreachable fails instead of hanging past the client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.fault.netns import Network
from tests.support.cluster import active_controller, alive, leader_state
from tests.support.node import ClusterProcesses, NodeProcess
from tests.support.waiting import eventually

FAULT_ENV = {
    "TIDELOG_SESSION_TIMEOUT_MS": "3000",
    "TIDELOG_HEARTBEAT_INTERVAL_MS": "300",
    "TIDELOG_REPLICA_LAG_TIME_MS": "3000",
    "TIDELOG_LEADER_TIMEOUT_MS": "2000",
    "TIDELOG_ELECTION_TIMEOUT_MS": "3000",
    "TIDELOG_METADATA_WAIT_MS": "2000",
    "TIDELOG_FORWARD_TIMEOUT_MS": "5000",
    "TIDELOG_LOG_LEVEL": "info",
    # Nodes talk to each other on 10.x addresses: never through a proxy a CI machine may set.
    "NO_PROXY": "*",
    "no_proxy": "*",
}
SESSION_TIMEOUT_S = int(FAULT_ENV["TIDELOG_SESSION_TIMEOUT_MS"]) / 1000
RAFT_PORT = 9001


class FaultCluster:
    def __init__(self, base_dir: Path, topic: str = "fault", partitions: int = 3, n: int = 3) -> None:
        self.base_dir = base_dir.resolve()
        self.topic = topic
        self.partitions = partitions
        self.net = Network(n)
        self.procs: ClusterProcesses | None = None
        self.paused: set[int] = set()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> FaultCluster:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.net.create()
        ids = range(1, self.net.n + 1)
        self.procs = ClusterProcesses(
            self.base_dir, self.net.n, env=FAULT_ENV,
            hosts=[self.net.host(i) for i in ids], command_prefixes=[self.net.prefix(i) for i in ids],
        )
        self.procs.start()
        eventually(lambda: active_controller(self.c), 60, "a controller")
        with httpx.Client(timeout=30, trust_env=False) as http:
            http.post(f"{self.url(1)}/v1/topics", json={
                "name": self.topic, "partitions": self.partitions, "replication_factor": 3,
                "config": {"min_insync_replicas": 2},
            }).raise_for_status()
        self.wait_healthy(60)
        return self

    def close(self) -> None:
        try:
            if self.procs is not None:
                self.procs.kill_all()
        finally:
            self.net.close()

    @property
    def c(self) -> ClusterProcesses:
        assert self.procs is not None, "start() first"
        return self.procs

    @property
    def ids(self) -> list[int]:
        return [n.node_id for n in self.c.nodes]

    def url(self, node: int) -> str:
        return self.c.node(node).url

    def node(self, node: int) -> NodeProcess:
        return self.c.node(node)

    # -- questions -----------------------------------------------------------------------------
    def leader_of(self, partition: int) -> int | None:
        """The leader at the newest leader epoch any reachable, running node knows."""
        best: tuple[int, int] | None = None
        for n in alive(self.c):
            if n.node_id in self.paused:
                continue
            try:
                s = httpx.get(f"{n.url}/v1/topics/{self.topic}/partitions/{partition}", timeout=1.0,
                              trust_env=False).json()
            except (httpx.HTTPError, ValueError):
                continue
            if s.get("leader") is not None and (best is None or s["leader_epoch"] > best[0]):
                best = (s["leader_epoch"], s["leader"])
        return best[1] if best else None

    def controller(self) -> int | None:
        for n in alive(self.c):
            if n.node_id in self.paused:
                continue
            try:
                ctrl = httpx.get(f"{n.url}/v1/cluster", timeout=1.0, trust_env=False).json()["controller"]
            except (httpx.HTTPError, ValueError, KeyError):
                continue
            if ctrl.get("node_id") is not None:
                return int(ctrl["node_id"])
        return None

    def healthy(self) -> dict[str, Any] | None:
        """Every node up, one controller, every partition led with all 3 replicas in sync.

        (Not HW = LEO: the workload keeps producing, so the leader's tail is usually in flight.)
        """
        if len(alive(self.c)) != self.net.n or self.paused:
            return None
        ctrl = active_controller(self.c)
        if ctrl is None:
            return None
        states = []
        for p in range(self.partitions):
            s = leader_state(self.c, self.topic, p)
            if not s or len(s["isr"]) != self.net.n:
                return None
            states.append(s)
        return {"controller": ctrl, "leaders": [s["leader"] for s in states]}

    def views(self) -> dict[int, Any]:
        """Every running node's ``/v1/cluster`` and topic state, for the history of a stuck run."""
        out: dict[int, Any] = {}
        for n in alive(self.c):
            view: dict[str, Any] = {}
            for name, path in (("cluster", "/v1/cluster"), ("topic", f"/v1/topics/{self.topic}")):
                try:
                    view[name] = httpx.get(n.url + path, timeout=2.0, trust_env=False).json()
                except (httpx.HTTPError, ValueError) as e:
                    view[name] = repr(e)
            for p in range(self.partitions):
                try:
                    view[f"events-{p}"] = httpx.get(f"{n.url}/v1/topics/{self.topic}/partitions/{p}/events",
                                                    timeout=2.0, trust_env=False).json()
                except (httpx.HTTPError, ValueError) as e:
                    view[f"events-{p}"] = repr(e)
            out[n.node_id] = view
        return out

    def wait_healthy(self, timeout_s: float) -> dict[str, Any]:
        return eventually(self.healthy, timeout_s, "the cluster healthy (all in sync)")

    # -- faults --------------------------------------------------------------------------------
    def kill(self, node: int) -> None:
        self.node(node).kill()
        self.paused.discard(node)

    def restart(self, node: int) -> None:
        # Not waiting for /readyz here: the runner's settle step checks health as a whole,
        # and a node that cannot get ready is a finding, not a harness error.
        if not self.node(node).alive:
            self.node(node).start(wait_ready_s=0)

    def pause(self, node: int) -> None:
        self.node(node).pause()
        self.paused.add(node)

    def resume(self, node: int) -> None:
        if self.node(node).alive:
            self.node(node).resume()
        self.paused.discard(node)

    def heal_all(self) -> None:
        """Undo every fault: network cuts flushed, paused nodes resumed, dead nodes restarted."""
        self.net.heal()
        for node in list(self.paused):
            self.resume(node)
        for node in self.ids:
            self.restart(node)
