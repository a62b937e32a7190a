"""Inbound webhooks against a real node: bodies, signatures, dedupe, config, restart."""

from __future__ import annotations

import base64
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from app.hooks.signatures import github_signature, stripe_signature
from tests.integration.conftest import assert_problem
from tests.support.node import NodeProcess

SECRET = "It's a Secret to Everybody"


def _records(http: httpx.Client, topic: str, partition: int = 0) -> list[dict[str, Any]]:
    r = http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params={"max_records": 1000})
    r.raise_for_status()
    return list(r.json()["records"])


def _all_records(http: httpx.Client, topic: str) -> list[dict[str, Any]]:
    n = len(http.get(f"/v1/topics/{topic}").json()["partitions"])
    return [rec for p in range(n) for rec in _records(http, topic, p)]


def _topic(http: httpx.Client, name: str, partitions: int = 1) -> str:
    http.post("/v1/topics", json={"name": name, "partitions": partitions}).raise_for_status()
    return name


def _github(http: httpx.Client, topic: str, body: bytes, delivery: str, secret: str = SECRET,
            signature: str | None = None) -> httpx.Response:
    return http.post(f"/v1/hooks/{topic}", content=body, headers={
        "content-type": "application/json",
        "x-github-event": "push",
        "x-github-delivery": delivery,
        "x-hub-signature-256": signature or github_signature(secret, body),
    })


def _configure(http: httpx.Client, topic: str, cfg: dict[str, Any]) -> dict[str, Any]:
    r = http.put(f"/v1/hooks/{topic}/config", json=cfg)
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_json_text_and_binary_bodies_are_stored_as_one_record_each(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    t = _topic(http, topic_name())
    assert http.post(f"/v1/hooks/{t}", json={"action": "opened", "n": 1}).status_code == 200
    r = http.post(f"/v1/hooks/{t}", content="plain ünïcode text", headers={"content-type": "text/plain"})
    assert r.status_code == 200 and r.json()["offset"] == 1
    blob = bytes(range(256))
    http.post(f"/v1/hooks/{t}", content=blob, headers={"content-type": "application/octet-stream"})
    http.post(f"/v1/hooks/{t}", content=b"{not json", headers={"content-type": "application/json"})
    recs = _records(http, t)
    assert [r["value"] for r in recs[:2]] == [{"action": "opened", "n": 1}, "plain ünïcode text"]
    assert [r["headers"]["tidelog-body"] for r in recs] == ["json", "text", "base64", "text"]
    assert base64.b64decode(recs[2]["value"]) == blob
    assert recs[3]["value"] == "{not json"
    assert recs[1]["headers"]["content-type"] == "text/plain"


def test_github_signed_deliveries_are_stored_and_bad_ones_refused_with_nothing_stored(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    t = _topic(http, topic_name())
    cfg = _configure(http, t, {"signature": {"scheme": "github", "secrets": [SECRET]}})
    assert cfg["signature"] == {"scheme": "github", "secret_count": 1, "tolerance_s": 300}
    assert SECRET not in http.get(f"/v1/hooks/{t}/config").text
    body = b'{"zen": "Keep it logically awesome.", "hook_id": 1}'
    ok = _github(http, t, body, "d-1")
    assert ok.status_code == 200, ok.text
    assert ok.json() == {"topic": t, "partition": 0, "offset": 0, "delivery_id": "d-1", "duplicate": False}

    tampered = body.replace(b"awesome", b"AWESOME")
    assert_problem(_github(http, t, tampered, "d-2", signature=github_signature(SECRET, body)), 401,
                   "SIGNATURE_INVALID")
    assert_problem(_github(http, t, body, "d-3", secret="wrong"), 401, "SIGNATURE_INVALID")
    assert_problem(_github(http, t, body, "d-4", signature="sha1=abc"), 401, "SIGNATURE_INVALID")
    assert_problem(http.post(f"/v1/hooks/{t}", content=body), 401, "SIGNATURE_MISSING")

    recs = _records(http, t)
    assert len(recs) == 1
    assert recs[0]["key"] == "d-1" and recs[0]["value"]["hook_id"] == 1
    assert recs[0]["headers"]["x-github-event"] == "push"
    assert recs[0]["headers"]["tidelog-delivery-id"] == "d-1"
    assert http.get(f"/v1/topics/{t}").json()["partitions"][0]["high_watermark"] == 1


def test_a_rotated_secret_accepts_both_old_and_new_signatures(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    t = _topic(http, topic_name())
    _configure(http, t, {"signature": {"scheme": "github", "secrets": ["new", "old"]}})
    assert _github(http, t, b"{}", "a", secret="old").status_code == 200
    assert _github(http, t, b"{}", "b", secret="new").status_code == 200
    assert_problem(_github(http, t, b"{}", "c", secret="other"), 401, "SIGNATURE_INVALID")


def test_stripe_signed_deliveries_check_the_timestamp_tolerance(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    t = _topic(http, topic_name())
    _configure(http, t, {"signature": {"scheme": "stripe", "secrets": ["whsec_test"], "tolerance_s": 60}})
    body = b'{"id": "evt_1", "type": "charge.succeeded", "data": {"object": {"amount": 100}}}'

    def post(sig: str, content: bytes = body) -> httpx.Response:
        return http.post(f"/v1/hooks/{t}", content=content,
                         headers={"content-type": "application/json", "stripe-signature": sig})

    now = int(time.time())
    r = post(stripe_signature("whsec_test", body, now))
    assert r.status_code == 200 and r.json()["delivery_id"] == "evt_1", r.text
    assert_problem(post(stripe_signature("whsec_test", body, now - 3600)), 401, "SIGNATURE_EXPIRED")
    assert_problem(post(stripe_signature("whsec_test", body, now), body.replace(b"100", b"999")), 401,
                   "SIGNATURE_INVALID")
    assert_problem(post(f"t={now},v0=abc"), 401, "SIGNATURE_INVALID")
    assert_problem(post("garbage"), 401, "SIGNATURE_INVALID")
    # A second v1 (Stripe sends several while a secret rolls) that matches is enough.
    good = stripe_signature("whsec_test", body.replace(b"evt_1", b"evt_2"), now)
    r = post(good.replace(",v1=", ",v1=00,v1="), body.replace(b"evt_1", b"evt_2"))
    assert r.status_code == 200, r.text
    recs = _records(http, t)
    assert [r["key"] for r in recs] == ["evt_1", "evt_2"]


def test_a_replayed_delivery_is_stored_once_with_the_same_answer(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    t = _topic(http, topic_name(), partitions=3)
    _configure(http, t, {"signature": {"scheme": "github", "secrets": [SECRET]}})
    body = b'{"action": "created"}'
    first = _github(http, t, body, "delivery-42").json()
    again = _github(http, t, body, "delivery-42").json()
    assert again == {**first, "duplicate": True}
    assert first["partition"] == zlib.crc32(b"delivery-42") % 3
    # Concurrent copies of one new delivery: exactly one record.
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _github(http, t, body, "delivery-43").json(), range(16)))
    assert len({(a["partition"], a["offset"]) for a in answers}) == 1
    assert sum(not a["duplicate"] for a in answers) == 1
    recs = _all_records(http, t)
    assert sorted(r["key"] for r in recs) == ["delivery-42", "delivery-43"]


def test_key_and_delivery_id_from_json_pointers_and_headers(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    t = _topic(http, topic_name(), partitions=4)
    _configure(http, t, {"delivery_id": {"json_pointer": "/event/id"},
                         "key": {"json_pointer": "/repo~1name"}, "keep_headers": ["X-Custom"]})
    body = {"event": {"id": 7}, "repo/name": "tidelog"}
    a = http.post(f"/v1/hooks/{t}", json=body, headers={"x-custom": "yes", "user-agent": "u"}).json()
    b = http.post(f"/v1/hooks/{t}", json=body).json()
    c = http.post(f"/v1/hooks/{t}", json={**body, "event": {"id": 8}}).json()
    assert a["delivery_id"] == "7" and b["duplicate"] and not c["duplicate"]
    assert a["partition"] == c["partition"] == zlib.crc32(b"tidelog") % 4
    recs = _records(http, t, a["partition"])
    assert [r["key"] for r in recs] == ["tidelog", "tidelog"]
    assert recs[0]["headers"] == {"x-custom": "yes", "tidelog-body": "json", "tidelog-delivery-id": "7"}


def test_dedupe_window_zero_stores_every_copy(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _topic(http, topic_name())
    _configure(http, t, {"delivery_id": {"header": "X-Id"}, "dedupe_window_ms": 0, "acks": "leader"})
    for _ in range(3):
        assert http.post(f"/v1/hooks/{t}", json={}, headers={"x-id": "same"}).status_code == 200
    assert len(_records(http, t)) == 3


@pytest.mark.parametrize(
    "cfg",
    [
        {"signature": {"scheme": "gitlab", "secrets": ["x"]}},
        {"signature": {"scheme": "github", "secrets": []}},
        {"signature": {"scheme": "github", "secrets": [""]}},
        {"key": {"header": "a", "json_pointer": "/a"}},
        {"key": {}},
        {"delivery_id": {"json_pointer": "no-slash"}},
        {"keep_headers": ["bad header"]},
        {"acks": "some"},
        {"dedupe_window_ms": -1},
        {"unknown": 1},
    ],
)
def test_invalid_hook_configs_are_refused_and_the_old_one_kept(
    http: httpx.Client, topic_name: Callable[[], str], cfg: dict[str, Any]
) -> None:
    t = _topic(http, topic_name())
    _configure(http, t, {"acks": "leader"})
    assert_problem(http.put(f"/v1/hooks/{t}/config", json=cfg), 400, "INVALID_REQUEST")
    assert http.get(f"/v1/hooks/{t}/config").json()["acks"] == "leader"


def test_config_lifecycle_and_unknown_topics(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    assert_problem(http.post("/v1/hooks/no-such-topic", json={}), 404, "TOPIC_NOT_FOUND")
    assert_problem(http.put("/v1/hooks/no-such-topic/config", json={}), 404, "TOPIC_NOT_FOUND")
    t = _topic(http, topic_name())
    default = http.get(f"/v1/hooks/{t}/config").json()
    assert default["configured"] is False and default["signature"] is None
    _configure(http, t, {"signature": {"scheme": "github", "secrets": [SECRET]}})
    assert http.get(f"/v1/hooks/{t}/config").json()["configured"] is True
    assert http.post(f"/v1/hooks/{t}", json={}).status_code == 401
    assert http.delete(f"/v1/hooks/{t}/config").status_code == 204
    assert http.post(f"/v1/hooks/{t}", json={}).status_code == 200
    # A config dies with its topic: the re-created topic takes unsigned deliveries.
    _configure(http, t, {"signature": {"scheme": "github", "secrets": [SECRET]}})
    assert http.delete(f"/v1/topics/{t}").status_code == 204
    _topic(http, t)
    assert http.get(f"/v1/hooks/{t}/config").json()["configured"] is False


def test_an_oversized_delivery_is_refused_with_413(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _topic(http, topic_name())
    big = b"x" * (9 * 1024 * 1024)
    assert_problem(http.post(f"/v1/hooks/{t}", content=big, headers={"content-type": "text/plain"}), 413,
                   "RECORD_TOO_LARGE")
    assert _records(http, t) == []


def test_dedupe_survives_a_kill_and_restart(node: NodeProcess) -> None:
    with httpx.Client(base_url=node.url, timeout=30) as http:
        t = _topic(http, "restarted")
        _configure(http, t, {"signature": {"scheme": "github", "secrets": [SECRET]}})
        first = [_github(http, t, b'{"n": %d}' % i, f"id-{i}").json() for i in range(5)]
    node.kill()
    node.start()
    with httpx.Client(base_url=node.url, timeout=30) as http:
        replay = [_github(http, t, b'{"n": %d}' % i, f"id-{i}").json() for i in range(5)]
        assert replay == [{**f, "duplicate": True} for f in first]
        assert _github(http, t, b"{}", "id-new").json()["offset"] == 5
        assert len(_records(http, t)) == 6
