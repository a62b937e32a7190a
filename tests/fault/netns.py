"""One network namespace per node, joined by a bridge, with nftables cuts inside them.

Why namespaces and not a TCP/UDP proxy between nodes: a proxy only sees the
traffic that is pointed at it, so every address a node learns (voter URLs,
advertised URLs in metadata, raft UDP peers) would have to be rewritten to go
through it, and a bug that bypasses it would go unnoticed. In a namespace a
node owns a real address (``10.a.b.N``) and every packet it sends, HTTP or the
controller's raft UDP, crosses its own veth; a packet filter there cuts exactly
what a switch failure would, including one direction only. The test process
sits in the root namespace on the bridge (``10.a.b.254``) and reaches every node
directly, so the workload is never cut unless a test asks for it.

Cuts are ``drop`` rules in the *receiver's* ``input`` hook (``src -> dst`` is
a rule in ``dst`` matching ``src``'s address). Dropping on the receiving side
makes the sender see what a broken link shows it: ``sendto``/``connect``
succeed and nothing comes back, whereas a drop in the sender's own ``output``
hook fails the system call at once with ``EPERM``, an error no real network
produces. A one-way cut really is one way: UDP from ``dst`` still arrives at
``src``; TCP breaks both ways in practice since acknowledgements cannot come
back, as on a real half-broken link.

Everything created carries a per-run random tag in its name, so parallel runs
do not collide, and :meth:`Network.close` removes it all (deleting a namespace
deletes the veth end inside it and with it its peer).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


class NetnsUnavailable(RuntimeError):
    """Why this machine cannot run the namespace-based fault suite (a skip reason)."""


def _run(*argv: str, ns: str | None = None, stdin: str | None = None) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def unavailable_reason() -> str | None:
    """None when we can create namespaces and nftables rules, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` not installed (./dev test installs it as root: nftables, iproute2)"
    probe = f"tfp{secrets.token_hex(3)}"
    try:
        _run("ip", "netns", "add", probe)
        try:
            _run("nft", "add", "table", "inet", "probe", ns=probe)
        finally:
            _run("ip", "netns", "del", probe)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        return f"cannot create a network namespace with nftables here: {e}"
    return None


def _used_subnets() -> set[tuple[int, int]]:
    out = _run("ip", "-4", "-o", "addr", "show")
    used = set()
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            a = parts[parts.index("inet") + 1].split("/")[0].split(".")
            if a[0] == "10":
                used.add((int(a[1]), int(a[2])))
    return used


@dataclass
class Network:
    """``n`` namespaces ``<tag>-1..n`` with addresses ``10.a.b.1..n`` on one bridge."""

    n: int
    tag: str = field(default_factory=lambda: f"tf{secrets.token_hex(3)}")
    subnet: tuple[int, int] = (0, 0)
    cuts: set[tuple[int, int]] = field(default_factory=set)
    _created: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"{self.tag}br"

    def ns(self, node: int) -> str:
        return f"{self.tag}-{node}"

    def host(self, node: int) -> str:
        return f"10.{self.subnet[0]}.{self.subnet[1]}.{node}"

    @property
    def gateway(self) -> str:
        return f"10.{self.subnet[0]}.{self.subnet[1]}.254"

    def prefix(self, node: int) -> list[str]:
        """The command prefix that runs a program inside ``node``'s namespace."""
        return ["ip", "netns", "exec", self.ns(node)]

    def create(self) -> Network:
        used = _used_subnets()
        rnd = int.from_bytes(bytes.fromhex(self.tag[2:]), "big")
        for i in range(256):
            cand = (200 + (rnd + i) % 50, (rnd >> 8) % 256)
            if cand not in used:
                self.subnet = cand
                break
        else:
            raise RuntimeError("no free 10.x.y.0/24 subnet")
        try:
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            self._created.append("bridge")
            _run("ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            for node in range(1, self.n + 1):
                self._add_node(node)
        except BaseException:
            self.close()
            raise
        return self

    def _add_node(self, node: int) -> None:
        ns, outside, inside = self.ns(node), f"{self.tag}v{node}", f"{self.tag}p{node}"
        _run("ip", "netns", "add", ns)
        self._created.append(ns)
        _run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        _run("ip", "link", "set", inside, "netns", ns)
        _run("ip", "link", "set", outside, "master", self.bridge)
        _run("ip", "link", "set", outside, "up")
        _run("ip", "link", "set", "lo", "up", ns=ns)
        _run("ip", "addr", "add", f"{self.host(node)}/24", "dev", inside, ns=ns)
        _run("ip", "link", "set", inside, "up", ns=ns)
        # The chain every cut goes into; flushing it heals the node.
        _run("nft", "-f", "-", ns=ns, stdin=(
            "table inet fault {\n"
            "  chain cuts { type filter hook input priority 0; policy accept; }\n"
            "}\n"
        ))

    # -- cuts -----------------------------------------------------------------------------
    def cut(self, src: int, dst: int, *, udp_port: int | None = None) -> None:
        """Drop packets from ``src`` to ``dst`` (only UDP datagrams to ``dst``'s ``udp_port`` if given)."""
        match = f"ip saddr {self.host(src)}"
        if udp_port is not None:
            match += f" udp dport {udp_port}"
        _run("nft", "add", "rule", "inet", "fault", "cuts", *match.split(), "drop", ns=self.ns(dst))
        self.cuts.add((src, dst))

    def cut_both(self, a: int, b: int, *, udp_port: int | None = None) -> None:
        self.cut(a, b, udp_port=udp_port)
        self.cut(b, a, udp_port=udp_port)

    def isolate(self, node: int, peers: Iterable[int], *, udp_port: int | None = None) -> None:
        """Cut ``node`` from every peer both ways; the test process can still reach it."""
        for p in peers:
            if p != node:
                self.cut_both(node, p, udp_port=udp_port)

    def heal(self, nodes: Sequence[int] | None = None) -> None:
        for node in nodes or range(1, self.n + 1):
            _run("nft", "flush", "chain", "inet", "fault", "cuts", ns=self.ns(node))
        self.cuts = {c for c in self.cuts if nodes is not None and c[1] not in nodes}

    def rules(self, node: int) -> str:
        """The cuts into ``node`` (nftables syntax), for a failure message."""
        return _run("nft", "list", "chain", "inet", "fault", "cuts", ns=self.ns(node))

    def close(self, timeout_s: float = 20.0) -> None:
        """Remove every namespace and the bridge, and wait until they are gone.

        Safe to call twice or after a partial ``create``. The kernel frees a namespace
        (and the veth pair in it) asynchronously, so deletion is retried until neither
        the names nor the links are listed any more.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            for name in reversed(self._created):
                argv = ["ip", "link", "del", self.bridge] if name == "bridge" else ["ip", "netns", "del", name]
                subprocess.run(argv, capture_output=True, timeout=30)
            listed = _run("ip", "netns", "list") + _run("ip", "-o", "link")
            self._created = [n for n in self._created if (self.bridge if n == "bridge" else n) in listed]
            if not self._created and self.tag not in listed:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not remove network {self.tag}: still listed")
            time.sleep(0.1)

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *exc: object) -> None:
        self.close()
