"""Inbound webhooks on a 3-node cluster: any node takes a delivery, and a replay after the
leader is killed is still recognised by the new leader (its ledger is rebuilt from the log)."""

from __future__ import annotations

import httpx

from app.hooks.signatures import github_signature
from tests.integration.replication.conftest import alive, create_replicated, eventually, leader_state, read_all
from tests.support.node import ClusterProcesses

SECRET = "s3cret"


def _deliver(url: str, topic: str, body: bytes, delivery: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/hooks/{topic}", content=body, timeout=15, headers={
        "content-type": "application/json", "x-github-delivery": delivery,
        "x-hub-signature-256": github_signature(SECRET, body),
    })


def test_deliveries_through_followers_and_replays_after_leader_kill_are_stored_once(
    cluster: ClusterProcesses,
) -> None:
    [state] = create_replicated(cluster, "gh", partitions=1)
    leader = state["leader"]
    follower = next(n for n in cluster.nodes if n.node_id != leader)
    r = httpx.put(f"{follower.url}/v1/hooks/gh/config", timeout=15,
                  json={"signature": {"scheme": "github", "secrets": [SECRET]}})
    assert r.status_code == 200, r.text
    # The config reached every broker; a delivery through a follower is verified and forwarded.
    for n in cluster.nodes:
        eventually(lambda n=n: httpx.get(f"{n.url}/v1/hooks/gh/config", timeout=5).json()["configured"],
                   what=f"hook config on node {n.node_id}")
    tampered = httpx.post(f"{follower.url}/v1/hooks/gh", content=b'{"n": 1}', timeout=15, headers={
        "content-type": "application/json", "x-github-delivery": "x",
        "x-hub-signature-256": github_signature(SECRET, b'{"n": 0}'),
    })
    assert tampered.status_code == 401
    first = [_deliver(follower.url, "gh", b'{"n": %d}' % i, f"d{i}").json() for i in range(10)]
    assert [f["offset"] for f in first] == list(range(10))

    cluster.node(leader).kill()
    eventually(lambda: (s := leader_state(cluster, "gh", 0)) and s["leader"] != leader and s,
               timeout_s=60, what="a new leader")
    survivor = alive(cluster)[0]

    def replay(i: int) -> dict[str, object] | None:
        resp = _deliver(survivor.url, "gh", b'{"n": %d}' % i, f"d{i}")
        return resp.json() if resp.status_code == 200 else None

    replays = [eventually(lambda i=i: replay(i), timeout_s=30, what=f"replay d{i}") for i in range(10)]
    assert replays == [{**f, "duplicate": True} for f in first]
    assert [v for _, v in read_all(survivor, "gh", 0)] == [{"n": i} for i in range(10)]
