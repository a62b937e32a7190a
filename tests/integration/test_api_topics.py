"""Topic administration over real HTTP: create/idempotency/conflict, list, describe, delete,
and the name rules of API.md."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.integration.conftest import assert_problem

PARTITION_STATE_FIELDS = {
    "partition",
    "leader",
    "replicas",
    "isr",
    "lrs",
    "leader_epoch",
    "partition_epoch",
    "high_watermark",
    "log_end_offset",
    "log_start_offset",
    "status",
    "under_replicated",
    "replica_states",
}
REPLICA_STATE_FIELDS = {"broker", "log_end_offset", "lag", "last_fetch_ms", "in_sync", "live"}


def test_create_is_idempotent_and_conflicts_on_another_spec(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    name = topic_name()
    spec = {"name": name, "partitions": 2, "replication_factor": 1}
    first = http.post("/v1/topics", json=spec)
    assert first.status_code == 201, first.text
    assert first.json()["name"] == name
    again = http.post("/v1/topics", json=spec)
    assert again.status_code == 200, again.text
    assert again.json()["topic_id"] == first.json()["topic_id"]
    assert_problem(http.post("/v1/topics", json={**spec, "partitions": 3}), 409, "TOPIC_EXISTS")
    other_cfg = {**spec, "config": {"retention_ms": 60_000}}
    assert_problem(http.post("/v1/topics", json=other_cfg), 409, "TOPIC_EXISTS")
    # The refused requests changed nothing.
    assert len(http.get(f"/v1/topics/{name}").json()["partitions"]) == 2


def test_create_with_explicit_default_config_equals_the_defaults(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    """Spelling out the documented defaults is the same spec as leaving them out."""
    name = topic_name()
    assert http.post("/v1/topics", json={"name": name}).status_code == 201
    explicit = {
        "name": name,
        "partitions": 1,
        "replication_factor": 1,
        "config": {
            "min_insync_replicas": 1,
            "retention_ms": None,
            "retention_bytes": None,
            "segment_bytes": 134217728,
            "cleanup_policy": "delete",
            "unclean_leader_election": False,
        },
    }
    assert http.post("/v1/topics", json=explicit).status_code == 200


def test_list_describe_delete(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    name = topic_name()
    assert http.post("/v1/topics", json={"name": name, "partitions": 3}).status_code == 201
    listed = http.get("/v1/topics")
    assert listed.status_code == 200
    assert listed.headers["content-type"].startswith("application/json")
    assert name in {t["name"] for t in listed.json()["topics"]}

    desc = http.get(f"/v1/topics/{name}").json()
    assert desc["name"] == name
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    for p in desc["partitions"]:
        assert p.keys() >= PARTITION_STATE_FIELDS, p
        assert p["status"] == "online"
        assert p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1]
        assert p["high_watermark"] == p["log_end_offset"] == p["log_start_offset"] == 0
        assert p["under_replicated"] is False
        assert p["replica_states"] and p["replica_states"][0].keys() >= REPLICA_STATE_FIELDS

    one = http.get(f"/v1/topics/{name}/partitions/2")
    assert one.status_code == 200 and one.json()["partition"] == 2
    assert_problem(http.get(f"/v1/topics/{name}/partitions/3"), 404, "PARTITION_NOT_FOUND")

    deleted = http.delete(f"/v1/topics/{name}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert_problem(http.get(f"/v1/topics/{name}"), 404, "TOPIC_NOT_FOUND")
    assert_problem(http.delete(f"/v1/topics/{name}"), 404, "TOPIC_NOT_FOUND")
    assert name not in {t["name"] for t in http.get("/v1/topics").json()["topics"]}


def test_recreated_topic_starts_empty(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    """Deleting a topic deletes its records: a new topic of the same name starts at offset 0."""
    name = topic_name()
    assert http.post("/v1/topics", json={"name": name}).status_code == 201
    r = http.post(f"/v1/topics/{name}/records", json={"records": [{"value": i} for i in range(5)]})
    assert r.status_code == 200, r.text
    assert http.delete(f"/v1/topics/{name}").status_code == 204
    assert http.post("/v1/topics", json={"name": name}).status_code == 201
    page = http.get(f"/v1/topics/{name}/partitions/0/records").json()
    assert page["records"] == [] and page["log_end_offset"] == 0
    r = http.post(f"/v1/topics/{name}/records", json={"records": [{"value": "new"}]})
    assert r.json()["offsets"] == [{"partition": 0, "offset": 0}]


@pytest.mark.parametrize(
    "name",
    ["bad name", ".", "..", "__internal", "x" * 250, "", "slash/y", "tab\tz", "ünïcode"],
    ids=["space", "dot", "dotdot", "reserved", "250chars", "empty", "slash", "tab", "unicode"],
)
def test_invalid_topic_names_are_refused(http: httpx.Client, name: str) -> None:
    assert_problem(http.post("/v1/topics", json={"name": name}), 400, "INVALID_TOPIC_NAME")
    assert name not in {t["name"] for t in http.get("/v1/topics").json()["topics"]}


def test_longest_valid_name_and_all_allowed_characters(http: httpx.Client) -> None:
    name = ("Az09._-" * 40)[:249]
    assert http.post("/v1/topics", json={"name": name}).status_code == 201
    assert http.get(f"/v1/topics/{name}").json()["name"] == name
    assert http.delete(f"/v1/topics/{name}").status_code == 204


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b"null",
        b'{"partitions": 1}',
        b'{"name": 7}',
        b'{"name": "ok-name", "partitions": 0}',
        b'{"name": "ok-name", "partitions": "two"}',
        b'{"name": "ok-name", "replication_factor": 0}',
        b'{"name": "ok-name", "bogus": 1}',
        b'{"name": "ok-name", "config": {"bogus": 1}}',
        b'{"name": "ok-name", "config": {"cleanup_policy": "shred"}}',
        b'{"name": "ok-name", "config": {"min_insync_replicas": -1}}',
        b"\xff\xfe",
    ],
)
def test_malformed_create_requests_are_400(http: httpx.Client, body: bytes) -> None:
    resp = http.post("/v1/topics", content=body, headers={"content-type": "application/json"})
    assert_problem(resp, 400, "INVALID_REQUEST")
    assert "ok-name" not in {t["name"] for t in http.get("/v1/topics").json()["topics"]}


def test_replication_factor_above_live_brokers_is_400(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    resp = http.post("/v1/topics", json={"name": topic_name(), "replication_factor": 3})
    assert resp.status_code == 400, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    assert resp.json()["code"] in {"INVALID_REPLICATION_FACTOR", "INVALID_REQUEST"}
