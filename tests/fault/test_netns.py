"""The network faults really cut traffic: UDP and TCP between namespaces, one way or both.

A nemesis that silently does nothing would make every fault run pass; these
probes send real packets between two namespaces before, during and after cuts.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.fault.netns import Network

LISTEN = """
import socket, sys
proto, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
kind = socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM
s = socket.socket(socket.AF_INET, kind)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, port))
s.settimeout(1.5)
print("ready", flush=True)
try:
    if proto == "udp":
        print(s.recvfrom(100)[0].decode(), flush=True)
    else:
        s.listen()
        print(s.accept()[0].recv(100).decode(), flush=True)
except TimeoutError:
    print("nothing", flush=True)
"""

SEND = """
import socket, sys
proto, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if proto == "udp":
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"hello", (host, port))
else:
    try:
        socket.create_connection((host, port), timeout=1.0).sendall(b"hello")
    except OSError:
        pass
"""


def delivered(net: Network, src: int, dst: int, proto: str, port: int = 9001) -> bool:
    """Does a packet from ``src`` reach a listener in ``dst``? (waits up to 1.5 s for "no")."""
    listener = subprocess.Popen([*net.prefix(dst), sys.executable, "-c", LISTEN, proto, net.host(dst), str(port)],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        subprocess.run([*net.prefix(src), sys.executable, "-c", SEND, proto, net.host(dst), str(port)],
                       check=True, timeout=10)
        return listener.stdout.readline().strip() == "hello"
    finally:
        listener.kill()
        listener.wait()


@pytest.fixture
def net(netns_ok: None) -> Iterator[Network]:
    with Network(2) as n:
        yield n


@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_one_way_cut_drops_only_that_direction_and_heal_restores_it(net: Network, proto: str) -> None:
    assert delivered(net, 1, 2, proto) and delivered(net, 2, 1, proto)
    net.cut(1, 2)
    assert not delivered(net, 1, 2, proto)
    if proto == "udp":  # TCP needs both directions for a handshake; UDP shows the cut is one-way
        assert delivered(net, 2, 1, proto)
    net.heal()
    assert delivered(net, 1, 2, proto)


def test_a_raft_only_cut_drops_that_udp_port_and_nothing_else(net: Network) -> None:
    net.isolate(1, [2], udp_port=9001)
    assert not delivered(net, 1, 2, "udp", 9001) and not delivered(net, 2, 1, "udp", 9001)
    assert delivered(net, 1, 2, "udp", 9002) and delivered(net, 1, 2, "tcp", 9001)


def test_the_test_process_reaches_an_isolated_node_and_close_removes_everything(netns_ok: None) -> None:
    net = Network(2).create()
    try:
        net.isolate(1, [2])
        listener = subprocess.Popen([*net.prefix(1), sys.executable, "-c", LISTEN, "tcp", net.host(1), "8080"],
                                    stdout=subprocess.PIPE, text=True)
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        subprocess.run([sys.executable, "-c", SEND, "tcp", net.host(1), "8080"], check=True, timeout=10)
        assert listener.stdout.readline().strip() == "hello"
        listener.wait(5)
    finally:
        net.close()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert net.tag not in names and net.tag not in links
