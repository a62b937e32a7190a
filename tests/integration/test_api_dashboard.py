"""Dashboard endpoints and the cluster-wide partition state, on real processes.

Standalone cases share one node (``shared_node``); the aggregation case runs
three voters with RF=1 partitions, so every node is asked about partitions it
holds no replica of.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson
import pytest

from app.client import Client
from tests.integration.conftest import assert_problem, wait_until
from tests.support.node import ClusterProcesses, NodeProcess


def produce(url: str, topic: str, partition: int, n: int) -> None:
    with Client(url) as cl:
        cl.produce(topic, [{"value": i} for i in range(n)], partition=partition)


def test_page_and_assets_are_served_locally(http: httpx.Client) -> None:
    page = http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/static/dashboard.js" in page.text and "/static/dashboard.css" in page.text
    assert 'id="initial-snapshot"' in page.text
    for path in ("/static/dashboard.js", "/static/dashboard.css"):
        asset = http.get(path)
        assert asset.status_code == 200, path
        # Nothing is loaded from another host (no CDN): no absolute URLs in the assets.
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", asset.text), path
    assert not re.search(r"""(src|href)=["'](https?:)?//""", page.text)


def test_snapshot_shows_real_offsets_and_allows_cross_origin_reads(
    http: httpx.Client, topic_name: Callable[[], str], shared_node: NodeProcess
) -> None:
    t = topic_name()
    http.post("/v1/topics", json={"name": t, "partitions": 2}).raise_for_status()
    produce(shared_node.url, t, 1, 5)
    r = http.get("/v1/dashboard/snapshot")
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
    snap = r.json()
    assert snap["cluster"]["controller"]["mode"] == "standalone"
    [me] = snap["cluster"]["brokers"]
    assert me["reachable"] is True and me["status"] == "alive"
    [topic] = [x for x in snap["topics"] if x["name"] == t]
    assert topic["config"]["min_insync_replicas"] == 1 and topic["partition_count"] == 2
    p1 = topic["partitions"][1]
    assert (p1["high_watermark"], p1["log_end_offset"], p1["isr"], p1["lrs"]) == (5, 5, [1], [1])
    assert snap["summary"]["under_replicated"] == 0 and snap["summary"]["offline"] == 0
    assert http.get(f"/v1/topics/{t}/partitions/1").json()["high_watermark"] == 5


def test_partition_detail_has_history_and_samples(
    http: httpx.Client, topic_name: Callable[[], str], shared_node: NodeProcess
) -> None:
    t = topic_name()
    http.post("/v1/topics", json={"name": t, "partitions": 1}).raise_for_status()
    produce(shared_node.url, t, 0, 7)

    def detail() -> dict | None:
        d = http.get("/v1/dashboard/snapshot", params={"topic": t, "partition": 0}).json()["detail"]
        h = d["history"]
        return d if h and h["log_end_offset"] and h["log_end_offset"][-1] == 7 else None

    d = wait_until(detail, what="a sample with LEO 7")
    assert d["found"] and d["history_from"] == 1
    h = d["history"]
    assert len(h["time_ms"]) == len(h["high_watermark"]) == len(h["records_per_s"]) == len(h["max_lag"])
    assert h["time_ms"] == sorted(h["time_ms"])
    assert any(e["kind"] == "leader_change" and e["brokers"] == [1] for e in d["events"])
    page = http.get(f"/topics/{t}/partitions/0")
    assert page.status_code == 200 and f'data-topic="{t}"' in page.text


def test_event_stream_pushes_a_snapshot_every_second(http: httpx.Client) -> None:
    got: list[dict] = []
    with http.stream("GET", "/v1/dashboard/events", timeout=10) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["access-control-allow-origin"] == "*"
        for line in r.iter_lines():
            if line.startswith("data: "):
                got.append(orjson.loads(line[6:]))
                if len(got) == 3:
                    break
    assert got[0]["time_ms"] < got[2]["time_ms"]


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("?topic=x", 400, "INVALID_REQUEST"),
        ("?partition=0", 400, "INVALID_REQUEST"),
        ("?topic=no-such-topic&partition=0", 404, "TOPIC_NOT_FOUND"),
        ("?topic=dash-bad&partition=5", 404, "PARTITION_NOT_FOUND"),
        ("?topic=dash-bad&partition=-1", 400, "INVALID_REQUEST"),
        ("?topic=dash-bad&partition=zero", 400, "INVALID_REQUEST"),
    ],
)
def test_bad_dashboard_parameters_are_problems(http: httpx.Client, query: str, status: int, code: str) -> None:
    http.post("/v1/topics", json={"name": "dash-bad", "partitions": 1}).raise_for_status()
    for path in ("/v1/dashboard/snapshot", "/v1/dashboard/events"):
        assert_problem(http.get(path + query), status, code)
    assert_problem(http.get("/topics/no-such-topic/partitions/0"), 404, "TOPIC_NOT_FOUND")


def test_internal_dashboard_routes_need_the_cluster_secret(http: httpx.Client) -> None:
    for path in ("/internal/v1/dashboard/state", "/internal/v1/dashboard/partitions/x/0"):
        assert_problem(http.get(path), 401, "UNAUTHORIZED")
        assert_problem(http.get(path, headers={"authorization": "Bearer nope"}), 403, "FORBIDDEN")


def test_describe_from_any_node_shows_the_leaders_offsets(tmp_path: Path) -> None:
    """RF=1 partitions: each lives on one broker, the two others hold no replica of it."""
    c = ClusterProcesses(tmp_path, 3).start()
    try:
        with c.node(1).client() as cl:
            wait_until(lambda: _controller_known(c), 60, "an active controller")
            cl.create_topic("spread", partitions=3, replication_factor=1)

        def leaders() -> dict[int, int] | None:
            ps = httpx.get(f"{c.node(1).url}/v1/topics/spread", timeout=5).json()["partitions"]
            ok = all(p["status"] == "online" for p in ps)
            return {p["partition"]: p["leader"] for p in ps} if ok else None

        lead = wait_until(leaders, 60, "every partition online")
        for p in range(3):
            produce(c.node(1).url, "spread", p, 3 * (p + 1))
        for n in c.nodes:
            for p in range(3):
                def same(n: NodeProcess = n, p: int = p) -> dict | None:
                    s = httpx.get(f"{n.url}/v1/topics/spread/partitions/{p}", timeout=5).json()
                    return s if s["high_watermark"] == s["log_end_offset"] == 3 * (p + 1) else None

                s = wait_until(same, 30, f"node {n.node_id} showing spread/{p}'s offsets")
                assert s["state_from"] == lead[p] and s["lrs"] == [lead[p]]
                assert [r["broker"] for r in s["replica_states"]] == [lead[p]]
            topic = httpx.get(f"{n.url}/v1/topics/spread", timeout=5).json()
            assert [p["log_end_offset"] for p in topic["partitions"]] == [3, 6, 9]
            snap = httpx.get(f"{n.url}/v1/dashboard/snapshot", timeout=5).json()
            [st] = snap["topics"]
            assert [p["high_watermark"] for p in st["partitions"]] == [3, 6, 9]
            assert all(b["reachable"] for b in snap["cluster"]["brokers"])
            assert all(b["last_heartbeat_ms"] is not None for b in snap["cluster"]["brokers"])
    finally:
        c.kill_all()


def _controller_known(c: ClusterProcesses) -> bool:
    ids = {httpx.get(f"{n.url}/v1/cluster", timeout=2).json()["controller"]["node_id"] for n in c.nodes}
    return len(ids) == 1 and None not in ids


def test_history_records_the_deposed_leaders_truncation(tmp_path: Path) -> None:
    """Records only the leader had (followers paused, acks=leader) are truncated when it
    comes back as a follower of the new leader; the merged history shows it."""
    env = {"TIDELOG_SESSION_TIMEOUT_MS": "3000", "TIDELOG_HEARTBEAT_INTERVAL_MS": "300",
           "TIDELOG_REPLICA_LAG_TIME_MS": "10000", "TIDELOG_LEADER_TIMEOUT_MS": "2000",
           "TIDELOG_ELECTION_TIMEOUT_MS": "3000", "TIDELOG_METADATA_WAIT_MS": "2000"}
    c = ClusterProcesses(tmp_path, 3, env=env).start()
    try:
        wait_until(lambda: _controller_known(c), 60, "an active controller")
        with c.node(1).client() as cl:
            cl.create_topic("trunc", partitions=1, replication_factor=3, config={"min_insync_replicas": 2})

        def state() -> dict | None:
            s = httpx.get(f"{c.node(1).url}/v1/topics/trunc/partitions/0", timeout=5).json()
            return s if len(s["isr"]) == 3 and len(s["lrs"]) == 3 else None

        old = c.node(wait_until(state, 60, "a full ISR")["leader"])
        produce(old.url, "trunc", 0, 5)
        followers = [n for n in c.nodes if n is not old]
        for f in followers:
            f.pause()

        def parked_fetches_answered() -> bool:
            # A fetch parked at the leader would still carry new records to a paused
            # follower (its socket buffer); once none has come for a while, none is parked.
            s = httpx.get(f"{old.url}/v1/topics/trunc/partitions/0", timeout=5).json()
            quiet = [r for r in s["replica_states"] if r["broker"] != old.node_id
                     and (r["last_fetch_ms"] or 0) > 1500]
            return len(quiet) == 2

        wait_until(parked_fetches_answered, 30, "no fetch from the paused followers for 1.5 s")
        with Client(old.url) as cl:  # only the leader gets these
            cl.produce("trunc", [{"value": "lost"}] * 3, partition=0, acks="leader")
        old.kill()
        for f in followers:
            f.resume()
        url = followers[0].url

        def new_leader() -> dict | None:
            s = httpx.get(f"{url}/v1/topics/trunc/partitions/0", timeout=5).json()
            return s if s["leader"] not in (None, old.node_id) and s["status"] == "online" else None

        wait_until(new_leader, 60, "a new leader")
        old.start()

        def truncation() -> dict | None:
            d = httpx.get(f"{url}/v1/dashboard/snapshot", params={"topic": "trunc", "partition": 0},
                          timeout=5).json()["detail"]
            return next((e for e in d["events"] if e["kind"] == "truncation"), None)

        e = wait_until(truncation, 60, "the truncation in the merged history")
        assert e["brokers"] == [old.node_id]
        assert e["detail"]["from_leo"] == 8 and e["detail"]["to_offset"] == 5, e
        assert "diverged" in e["reason"]
    finally:
        c.kill_all()


@pytest.mark.slow  # five nodes, two failures: ~25 s on 2 cores
def test_history_flags_an_unclean_election(tmp_path: Path) -> None:
    """The only ISR member dies; the out-of-sync replica comes back and, the topic
    allowing it, leads: the history says so as an unclean election. Five voters, so the
    controller keeps a quorum with both replicas down."""
    env = {"TIDELOG_SESSION_TIMEOUT_MS": "3000", "TIDELOG_HEARTBEAT_INTERVAL_MS": "300",
           "TIDELOG_REPLICA_LAG_TIME_MS": "3000", "TIDELOG_LEADER_TIMEOUT_MS": "2000",
           "TIDELOG_ELECTION_TIMEOUT_MS": "3000", "TIDELOG_METADATA_WAIT_MS": "2000"}
    c = ClusterProcesses(tmp_path, 5, env=env).start()
    try:
        wait_until(lambda: _controller_known(c), 60, "an active controller")
        with c.node(1).client() as cl:
            cl.create_topic("uncl", partitions=1, replication_factor=2,
                            config={"min_insync_replicas": 1, "unclean_leader_election": True})

        def describe(n: NodeProcess) -> dict:
            return httpx.get(f"{n.url}/v1/topics/uncl/partitions/0", timeout=5).json()

        s = wait_until(lambda: (s := describe(c.node(1))) and len(s["isr"]) == 2 and s, 60, "a full ISR")
        leader = c.node(s["leader"])
        follower = c.node(next(b for b in s["replicas"] if b != leader.node_id))
        watcher = next(n for n in c.nodes if n not in (leader, follower))
        wait_until(lambda: describe(watcher)["isr"] == s["isr"], 60, "the watcher's metadata")
        follower.stop()
        wait_until(lambda: describe(watcher)["isr"] == [leader.node_id], 60, "the follower out of the ISR")
        produce(leader.url, "uncl", 0, 4)
        leader.kill()
        wait_until(lambda: describe(watcher)["status"] == "offline", 60, "the partition offline")
        follower.start()
        wait_until(lambda: describe(watcher)["leader"] == follower.node_id, 60, "the unclean election")

        def unclean() -> dict | None:
            d = httpx.get(f"{watcher.url}/v1/dashboard/snapshot", params={"topic": "uncl", "partition": 0},
                          timeout=5).json()["detail"]
            return next((e for e in d["events"] if e["kind"] == "unclean_election"), None)

        e = wait_until(unclean, 60, "the unclean election in the merged history")
        assert e["detail"]["leader"] == follower.node_id and "data may be lost" in e["reason"]
        assert follower.node_id in e["brokers"]
    finally:
        c.kill_all()
