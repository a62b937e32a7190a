"""Parsing of the voter set (KRaft's ``controller.quorum.voters``, plus HTTP URLs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Voter:
    node_id: int
    url: str
    raft_host: str
    raft_port: int


def parse_voters(spec: str) -> dict[int, Voter]:
    """``"1=http://h1:8080@h1:9001,2=..."`` → voters by id; ValueError on a bad entry."""
    voters: dict[int, Voter] = {}
    for item in filter(None, (x.strip() for x in spec.split(","))):
        try:
            ident, rest = item.split("=", 1)
            url, raft = rest.rsplit("@", 1)
            host, port = raft.rsplit(":", 1)
            v = Voter(int(ident), url.rstrip("/"), host, int(port))
        except ValueError:
            raise ValueError(
                f"bad voter {item!r}: expected id=http_url@raft_host:raft_port"
            ) from None
        if v.node_id in voters:
            raise ValueError(f"voter {v.node_id} listed twice")
        voters[v.node_id] = v
    return voters


def format_voters(voters: dict[int, Voter]) -> str:
    return ",".join(f"{v.node_id}={v.url}@{v.raft_host}:{v.raft_port}" for v in voters.values())
