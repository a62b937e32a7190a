"""Produce and fetch over real HTTP: JSON and NDJSON bodies, routing, acks, every fetch
parameter, long-poll and SSE. One node per module; every test uses its own topics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from app.client import Client
from app.node import partition_for_key
from tests.integration.conftest import assert_problem, read_all, wait_until
from tests.support.node import NodeProcess

NDJSON = {"content-type": "application/x-ndjson"}


def _create(http: httpx.Client, name: str, partitions: int = 1) -> str:
    r = http.post("/v1/topics", json={"name": name, "partitions": partitions})
    assert r.status_code == 201, r.text
    return name


def _produce(http: httpx.Client, topic: str, records: list[dict[str, Any]], **params: Any) -> list[dict[str, Any]]:
    r = http.post(f"/v1/topics/{topic}/records", json={"records": records}, params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    return r.json()["offsets"]  # type: ignore[no-any-return]


def _fetch(http: httpx.Client, topic: str, partition: int = 0, **params: Any) -> dict[str, Any]:
    r = http.get(f"/v1/topics/{topic}/partitions/{partition}/records", params=params)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


# ---- produce ---------------------------------------------------------------------------


def test_produce_json_roundtrips_every_field(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _create(http, topic_name())
    values: list[Any] = [{"nested": [1, 2.5, None, True]}, "text ü 🌊", 42, None, [1, "a"], False]
    records = [
        {"key": f"k{i}", "value": v, "headers": {"h": str(i)}, "timestamp": 1_000 + i} for i, v in enumerate(values)
    ]
    offs = _produce(http, t, records)
    assert offs == [{"partition": 0, "offset": i} for i in range(len(values))]
    page = _fetch(http, t)
    got = page["records"]
    assert [r["offset"] for r in got] == list(range(len(values)))
    assert [r["value"] for r in got] == values
    assert [r["key"] for r in got] == [f"k{i}" for i in range(len(values))]
    assert [r["headers"] for r in got] == [{"h": str(i)} for i in range(len(values))]
    assert [r["timestamp"] for r in got] == [1_000 + i for i in range(len(values))]
    assert all(isinstance(r["leader_epoch"], int) for r in got)
    assert page["next_offset"] == page["high_watermark"] == page["log_end_offset"] == len(values)
    assert page["log_start_offset"] == 0


def test_record_defaults_key_null_headers_empty_timestamp_now(
    http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    t = _create(http, topic_name())
    before = time.time_ns() // 1_000_000
    _produce(http, t, [{"value": 1}])
    after = time.time_ns() // 1_000_000
    (rec,) = _fetch(http, t)["records"]
    assert rec["key"] is None and rec["headers"] == {}
    assert before - 1000 <= rec["timestamp"] <= after + 1000


def test_produce_ndjson(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _create(http, topic_name())
    lines = [orjson.dumps({"key": "a", "value": {"n": i}}) for i in range(5)]
    body = b"\n".join(lines[:3]) + b"\n\n" + b"\r\n".join(lines[3:]) + b"\n"
    r = http.post(f"/v1/topics/{t}/records", content=body, headers=NDJSON)
    assert r.status_code == 200, r.text
    assert [o["offset"] for o in r.json()["offsets"]] == list(range(5))
    assert [rec["value"] for rec in read_all(http, t, 0)] == [{"n": i} for i in range(5)]


def test_explicit_partition_in_url_and_in_record(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _create(http, topic_name(), partitions=3)
    r = http.post(f"/v1/topics/{t}/partitions/2/records", json={"records": [{"value": "u"}]})
    assert r.status_code == 200 and r.json()["offsets"] == [{"partition": 2, "offset": 0}]
    offs = _produce(
        http,
        t,
        [
            {"value": "r1", "partition": 1},
            {"value": "r0", "partition": 0},
            {"value": "r1b", "partition": 1, "key": "ignored-for-routing"},
        ],
    )
    assert offs == [
        {"partition": 1, "offset": 0},
        {"partition": 0, "offset": 0},
        {"partition": 1, "offset": 1},
    ]
    assert [x["value"] for x in read_all(http, t, 1)] == ["r1", "r1b"]
    assert [x["value"] for x in read_all(http, t, 0)] == ["r0"]
    assert [x["value"] for x in read_all(http, t, 2)] == ["u"]


def test_same_key_same_partition_in_request_order(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _create(http, topic_name(), partitions=4)
    keys = [f"user-{i}" for i in range(12)]
    first = _produce(http, t, [{"key": k, "value": 0} for k in keys])
    second = _produce(http, t, [{"key": k, "value": 1} for k in keys])
    for k, a, b in zip(keys, first, second, strict=True):
        assert a["partition"] == b["partition"] == partition_for_key(k.encode(), 4)
        assert b["offset"] > a["offset"]
    assert len({o["partition"] for o in first}) > 1, "12 keys should not all hash to one partition"


def test_keyless_records_spread_across_requests(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _create(http, topic_name(), partitions=3)
    seen = {o["partition"] for _ in range(6) for o in _produce(http, t, [{"value": 1}, {"value": 2}])}
    assert seen == {0, 1, 2}


def test_acks_all_leader_none(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _create(http, topic_name())
    assert _produce(http, t, [{"value": "all"}], acks="all") == [{"partition": 0, "offset": 0}]
    assert _produce(http, t, [{"value": "leader"}], acks="leader") == [{"partition": 0, "offset": 1}]
    assert _produce(http, t, [{"value": "n1"}, {"value": "n2"}], acks="none") == [
        {"partition": 0, "offset": None},
        {"partition": 0, "offset": None},
    ]
    # acks=none still writes: the records land after the others, in order.
    got = wait_until(lambda: len(read_all(http, t, 0)) == 4 and read_all(http, t, 0), what="4 records")
    assert [r["value"] for r in got] == ["all", "leader", "n1", "n2"]
    # On one node a record commits as it is appended: even a zero timeout is met.
    assert _produce(http, t, [{"value": "t0"}], acks="all", timeout_ms=0) == [{"partition": 0, "offset": 4}]


def test_client_produce_and_fetch(shared_node: NodeProcess, topic_name: Callable[[], str]) -> None:
    """The reusable client module speaks the same contract."""
    t = topic_name()
    with shared_node.client() as c:
        created = c.create_topic(t, partitions=2)
        assert created["name"] == t
        offs = c.produce(t, [{"value": i} for i in range(3)], partition=1)
        assert [o["offset"] for o in offs] == [0, 1, 2]
        page = c.fetch(t, 1, "earliest")
        assert [r["value"] for r in page.records] == [0, 1, 2]
        assert [r["value"] for r in c.consume(t, 1, 1)] == [1, 2]
        assert t in {x["name"] for x in c.list_topics()}
        c.delete_topic(t)


# ---- fetch -----------------------------------------------------------------------------


@pytest.fixture
def ten(http: httpx.Client, topic_name: Callable[[], str]) -> str:
    """A one-partition topic holding values 0..9 at offsets 0..9 with timestamps 10_000+1000*i."""
    t = _create(http, topic_name())
    _produce(http, t, [{"value": i, "timestamp": 10_000 + 1000 * i} for i in range(10)])
    return t


def test_fetch_offset_forms(http: httpx.Client, ten: str) -> None:
    assert [r["offset"] for r in _fetch(http, ten, offset="earliest")["records"]] == list(range(10))
    assert [r["offset"] for r in _fetch(http, ten)["records"]] == list(range(10))
    latest = _fetch(http, ten, offset="latest")
    assert latest["records"] == [] and latest["next_offset"] == 10
    mid = _fetch(http, ten, offset=7)
    assert [r["value"] for r in mid["records"]] == [7, 8, 9] and mid["next_offset"] == 10
    at_end = _fetch(http, ten, offset=10)
    assert at_end["records"] == [] and at_end["next_offset"] == 10


def test_fetch_by_timestamp(http: httpx.Client, ten: str) -> None:
    assert _fetch(http, ten, timestamp=0)["records"][0]["offset"] == 0
    assert _fetch(http, ten, timestamp=13_000)["records"][0]["offset"] == 3
    assert _fetch(http, ten, timestamp=13_001)["records"][0]["offset"] == 4
    past = _fetch(http, ten, timestamp=10**12)
    assert past["records"] == [] and past["next_offset"] == 10


def test_fetch_max_records_pages_without_gaps(http: httpx.Client, ten: str) -> None:
    seen: list[int] = []
    offset = 0
    while offset < 10:
        page = _fetch(http, ten, offset=offset, max_records=3)
        assert 1 <= len(page["records"]) <= 3
        seen += [r["offset"] for r in page["records"]]
        offset = page["next_offset"]
    assert seen == list(range(10))


def test_fetch_max_bytes_returns_at_least_one_record(http: httpx.Client, topic_name: Callable[[], str]) -> None:
    t = _create(http, topic_name())
    big = "x" * 50_000
    _produce(http, t, [{"value": big}, {"value": big}, {"value": "small"}])
    one = _fetch(http, t, max_bytes=1)
    assert [r["offset"] for r in one["records"]] == [0] and one["records"][0]["value"] == big
    assert one["next_offset"] == 1
    two = _fetch(http, t, max_bytes=60_000)
    assert [r["offset"] for r in two["records"]] == [0]
    rest = _fetch(http, t, offset=1, max_bytes=1_000_000)
    assert [r["offset"] for r in rest["records"]] == [1, 2]


def test_fetch_isolation_committed_and_uncommitted(http: httpx.Client, ten: str) -> None:
    """On one node a record commits once appended: both isolations see the same records."""
    committed = _fetch(http, ten, isolation="committed")
    uncommitted = _fetch(http, ten, isolation="uncommitted")
    assert committed["records"] == uncommitted["records"]
    assert committed["high_watermark"] == 10
    assert _fetch(http, ten, offset="latest", isolation="uncommitted")["next_offset"] == 10


def test_long_poll_returns_a_record_produced_meanwhile(shared_node: NodeProcess, http: httpx.Client, ten: str) -> None:
    """A parked fetch is woken by another client's produce (long wait so only a wake can end it)."""
    result: dict[str, Any] = {}

    def poll() -> None:
        with httpx.Client(base_url=shared_node.url, timeout=120) as c:
            r = c.get(
                f"/v1/topics/{ten}/partitions/0/records",
                params={"offset": 10, "max_wait_ms": 120_000},
            )
            result["status"], result["body"] = r.status_code, r.json()

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    with httpx.Client(base_url=shared_node.url, timeout=30) as producer:
        r = producer.post(f"/v1/topics/{ten}/records", json={"records": [{"value": "wake"}]})
        assert r.status_code == 200
    th.join(60)
    assert not th.is_alive(), "long-poll did not return after a record was produced"
    assert result["status"] == 200
    assert [(x["offset"], x["value"]) for x in result["body"]["records"]] == [(10, "wake")]
    assert result["body"]["next_offset"] == 11


def test_long_poll_returns_empty_when_nothing_arrives(http: httpx.Client, ten: str) -> None:
    for isolation in ("committed", "uncommitted"):
        page = _fetch(http, ten, offset="latest", max_wait_ms=200, isolation=isolation)
        assert page["records"] == [] and page["next_offset"] == 10


# ---- SSE -------------------------------------------------------------------------------


def _sse_events(
    base_url: str, path: str, want: int, headers: dict[str, str] | None = None, **params: Any
) -> list[tuple[str | None, str | None, bytes]]:
    """Read ``want`` ``data`` events from an SSE stream, then disconnect.

    Returns ``(event, id, data)`` per event; comments and ``retry`` frames are skipped.
    """
    out: list[tuple[str | None, str | None, bytes]] = []
    with (
        httpx.Client(base_url=base_url, timeout=httpx.Timeout(30.0)) as c,
        c.stream("GET", path, params=params, headers=headers or {}) as r,
    ):
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        ev: str | None = None
        eid: str | None = None
        data: list[str] = []
        for line in r.iter_lines():
            if line == "":
                if data:
                    out.append((ev, eid, "\n".join(data).encode()))
                    if len(out) >= want or ev == "error":
                        return out
                ev, eid, data = None, None, []
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                eid = value
            elif field == "event":
                ev = value
            elif field == "data":
                data.append(value)
    return out


def test_sse_stream_ids_are_offsets_and_resume_with_last_event_id(
    shared_node: NodeProcess, http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    t = _create(http, topic_name())
    _produce(http, t, [{"value": i} for i in range(6)])
    path = f"/v1/topics/{t}/partitions/0/stream"
    first = _sse_events(shared_node.url, path, 3, offset="earliest")
    assert [e[1] for e in first] == ["0", "1", "2"]
    assert [orjson.loads(e[2])["value"] for e in first] == [0, 1, 2]
    assert all(orjson.loads(e[2])["offset"] == int(e[1] or -1) for e in first)

    # Reconnect as an EventSource would: exactly the rest, no gap, no duplicate,
    # including records produced while disconnected and while streaming.
    _produce(http, t, [{"value": 6}, {"value": 7}])
    rest_result: dict[str, Any] = {}

    def tail() -> None:
        rest_result["events"] = _sse_events(
            shared_node.url,
            path,
            7,
            headers={"Last-Event-ID": first[-1][1] or ""},
            offset="earliest",
        )

    th = threading.Thread(target=tail, daemon=True)
    th.start()
    _produce(http, t, [{"value": 8}, {"value": 9}])
    th.join(60)
    assert not th.is_alive(), "SSE stream did not deliver records produced while streaming"
    rest = rest_result["events"]
    assert [e[1] for e in rest] == [str(i) for i in range(3, 10)]
    assert [orjson.loads(e[2])["value"] for e in rest] == list(range(3, 10))


def test_sse_default_starts_at_latest(shared_node: NodeProcess, http: httpx.Client, ten: str) -> None:
    got: dict[str, Any] = {}

    def tail() -> None:
        got["events"] = _sse_events(shared_node.url, f"/v1/topics/{ten}/partitions/0/stream", 1)

    th = threading.Thread(target=tail, daemon=True)
    th.start()
    # Produce until the stream (which began at "latest", somewhere >= 10) has seen one record.
    n = 0
    deadline = time.monotonic() + 30
    while th.is_alive() and time.monotonic() < deadline:
        _produce(http, ten, [{"value": f"live-{n}"}])
        n += 1
        th.join(0.2)
    assert not th.is_alive()
    (ev,) = got["events"]
    assert int(ev[1] or -1) >= 10 and orjson.loads(ev[2])["value"].startswith("live-")


def test_sse_bad_requests(http: httpx.Client, ten: str) -> None:
    path = f"/v1/topics/{ten}/partitions/0/stream"
    assert_problem(http.get(path, headers={"Last-Event-ID": "abc"}), 400, "INVALID_REQUEST")
    assert_problem(http.get(path, params={"offset": "abc"}), 400, "INVALID_REQUEST")
    assert_problem(http.get(path, params={"offset": 11}), 416, "OFFSET_OUT_OF_RANGE")
    assert_problem(http.get(path, headers={"Last-Event-ID": "99"}), 416, "OFFSET_OUT_OF_RANGE")
    assert_problem(http.get(f"/v1/topics/{ten}/partitions/5/stream"), 404, "PARTITION_NOT_FOUND")
    assert_problem(http.get("/v1/topics/nope-nope/partitions/0/stream"), 404, "TOPIC_NOT_FOUND")


def test_client_consume_follow_sees_new_records(shared_node: NodeProcess, ten: str) -> None:
    got: list[Any] = []

    def follow() -> None:
        with Client(shared_node.url) as c:
            for rec in c.consume(ten, 0, 8, follow=True, max_wait_ms=500):
                got.append(rec["value"])
                if len(got) == 3:
                    return

    th = threading.Thread(target=follow, daemon=True)
    th.start()
    with Client(shared_node.url) as c:
        c.produce(ten, [{"value": "new"}])
    th.join(60)
    assert not th.is_alive()
    assert got == [8, 9, "new"]


@pytest.mark.parametrize(
    "ctype",
    ["application/json; charset=utf-8", "APPLICATION/JSON", "application/x-www-form-urlencoded"],
)
def test_json_content_type_variants_are_accepted(http: httpx.Client, topic_name: Callable[[], str], ctype: str) -> None:
    """Parameters and case do not matter, and a bare ``curl -d`` (form type) is JSON."""
    t = _create(http, topic_name())
    r = http.post(
        f"/v1/topics/{t}/records",
        content=b'{"records": [{"value": "c"}]}',
        headers={"content-type": ctype},
    )
    assert r.status_code == 200, r.text
    assert [x["value"] for x in read_all(http, t, 0)] == ["c"]


def test_deleting_a_topic_ends_parked_fetches_and_streams(
    shared_node: NodeProcess, http: httpx.Client, topic_name: Callable[[], str]
) -> None:
    """Waiters on a deleted topic get an answer at once: a 404 problem, an SSE error event."""
    t = _create(http, topic_name())
    got: dict[str, Any] = {}
    stream_open = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=shared_node.url, timeout=120) as c:
            got["fetch"] = c.get(f"/v1/topics/{t}/partitions/0/records", params={"offset": 0, "max_wait_ms": 120_000})

    def stream() -> None:
        with (
            httpx.Client(base_url=shared_node.url, timeout=120) as c,
            c.stream("GET", f"/v1/topics/{t}/partitions/0/stream", params={"offset": "earliest"}) as r,
        ):
            assert r.status_code == 200
            stream_open.set()
            got["sse"] = [line for line in r.iter_lines() if line]

    threads = [
        threading.Thread(target=poll, daemon=True),
        threading.Thread(target=stream, daemon=True),
    ]
    for th in threads:
        th.start()
    assert stream_open.wait(30), "stream did not open"
    assert http.delete(f"/v1/topics/{t}").status_code == 204
    for th in threads:
        th.join(60)
        assert not th.is_alive(), "a waiter on a deleted topic never returned"
    # Parked or not when the delete landed, the fetch's answer is the same.
    assert_problem(got["fetch"], 404, "TOPIC_NOT_FOUND")
    assert "event: error" in got["sse"], got["sse"]
