"""Cluster view, health, readiness, metrics and OpenAPI of a real single node."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx

from tests.support.node import NodeProcess


def test_cluster_view(http: httpx.Client, shared_node: NodeProcess) -> None:
    r = http.get("/v1/cluster")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    c = r.json()
    assert isinstance(c["cluster_id"], str) and c["cluster_id"]
    assert c["controller"]["node_id"] == 1 and "raft_leader" in c["controller"]
    assert isinstance(c["metadata_version"], int) and c["metadata_version"] >= 1
    (b,) = c["brokers"]
    assert b["id"] == 1 and b["url"] == shared_node.url
    assert b["status"] == "alive" and b["broker_epoch"] >= 1
    assert {"zone", "last_heartbeat_ms"} <= b.keys()


def test_metadata_version_moves_with_topic_changes(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    v0 = http.get("/v1/cluster").json()["metadata_version"]
    name = topic_name()
    assert http.post("/v1/topics", json={"name": name}).status_code == 201
    v1 = http.get("/v1/cluster").json()["metadata_version"]
    assert v1 > v0
    assert http.delete(f"/v1/topics/{name}").status_code == 204
    assert http.get("/v1/cluster").json()["metadata_version"] > v1


def test_health_and_readiness(http: httpx.Client) -> None:
    h = http.get("/healthz")
    assert h.status_code == 200 and h.json()["status"] == "ok"
    r = http.get("/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ready"


def _metric(text: str, name: str, labels: str = "") -> float:
    """The value of one sample in Prometheus text format (0.0 when absent)."""
    pat = re.compile(rf"^{re.escape(name)}{re.escape(labels)} ([0-9.e+-]+)$", re.M)
    m = pat.search(text)
    return float(m.group(1)) if m else 0.0


def test_metrics_counters_move(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    name = topic_name()
    assert http.post("/v1/topics", json={"name": name}).status_code == 201
    before = http.get("/metrics")
    assert before.status_code == 200
    assert before.headers["content-type"].startswith("text/plain")
    t0 = before.text
    r = http.post(f"/v1/topics/{name}/records", json={"records": [{"value": i} for i in range(7)]})
    assert r.status_code == 200
    assert http.get(f"/v1/topics/{name}/partitions/0/records").status_code == 200
    t1 = http.get("/metrics").text
    assert (
        _metric(t1, "tidelog_records_produced_total")
        - _metric(t0, "tidelog_records_produced_total")
        == 7
    )
    assert (
        _metric(t1, "tidelog_records_fetched_total") - _metric(t0, "tidelog_records_fetched_total")
        >= 7
    )
    assert _metric(t1, "tidelog_fetch_requests_total") > _metric(t0, "tidelog_fetch_requests_total")
    ok = '{outcome="ok"}'
    assert _metric(t1, "tidelog_produce_requests_total", ok) > _metric(
        t0, "tidelog_produce_requests_total", ok
    )
    part = f'{{partition="0",topic="{name}"}}'
    assert _metric(t1, "tidelog_partition_log_end_offset", part) == 7
    assert _metric(t1, "tidelog_partition_high_watermark", part) == 7


def test_openapi_documents_the_public_routes(http: httpx.Client) -> None:
    r = http.get("/openapi.json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    for p in (
        "/v1/topics",
        "/v1/topics/{topic}",
        "/v1/topics/{topic}/records",
        "/v1/topics/{topic}/partitions/{partition}",
        "/v1/topics/{topic}/partitions/{partition}/records",
        "/v1/topics/{topic}/partitions/{partition}/stream",
        "/v1/cluster",
    ):
        assert p in paths, p
    assert {"get", "post"} <= paths["/v1/topics"].keys()
    assert http.get("/docs").status_code == 200
