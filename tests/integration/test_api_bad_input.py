"""Bad input over real HTTP: every refusal is the documented 4xx problem+json with a stable
code (never a 500), and the data already stored reads back intact after the barrage.

The module stores a known set of records first (``stored``), throws every kind of bad
request at the node, and ends by reading that set back byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.conftest import assert_problem, read_all
from tests.support.node import NodeProcess

KNOWN_TOPIC = "known-good"
KNOWN = {p: [{"key": f"k{p}-{i}", "value": {"p": p, "i": i}} for i in range(20)] for p in range(2)}


@pytest.fixture(scope="module", autouse=True)
def stored(shared_node: NodeProcess) -> dict[int, list[dict[str, Any]]]:
    """The known records, produced once per module before any bad request."""
    with httpx.Client(base_url=shared_node.url) as c:
        assert c.post("/v1/topics", json={"name": KNOWN_TOPIC, "partitions": 2}).status_code == 201
        for p, recs in KNOWN.items():
            r = c.post(f"/v1/topics/{KNOWN_TOPIC}/partitions/{p}/records", json={"records": recs})
            assert r.status_code == 200, r.text
        return {p: read_all(c, KNOWN_TOPIC, p) for p in KNOWN}


RECORDS = f"/v1/topics/{KNOWN_TOPIC}/records"
FETCH = f"/v1/topics/{KNOWN_TOPIC}/partitions/0/records"
JSON = {"content-type": "application/json"}
NDJSON = {"content-type": "application/x-ndjson"}


# ---- produce bodies --------------------------------------------------------------------

BAD_JSON_BODIES: list[tuple[str, bytes]] = [
    ("truncated", b'{"records": [{"value": 1}'),
    ("garbage", b"not json at all"),
    ("empty", b""),
    ("invalid-utf8", b'{"records": [{"value": "\xff"}]}'),
    ("records-not-array", b'{"records": {"value": 1}}'),
    ("records-missing", b'{"value": 1}'),
    ("body-is-array", b'[{"value": 1}]'),
    ("body-is-string", b'"records"'),
    ("records-empty", b'{"records": []}'),
    ("record-not-object", b'{"records": [1, 2]}'),
    ("record-is-null", b'{"records": [null]}'),
    ("record-is-array", b'{"records": [[{"value": 1}]]}'),
    ("unknown-record-field", b'{"records": [{"value": 1, "vaule": 2}]}'),
    ("unknown-top-field", b'{"records": [{"value": 1}], "acks": "all"}'),
    ("key-number", b'{"records": [{"key": 5, "value": 1}]}'),
    ("key-object", b'{"records": [{"key": {"a": 1}, "value": 1}]}'),
    ("key-bool", b'{"records": [{"key": true, "value": 1}]}'),
    ("headers-list", b'{"records": [{"value": 1, "headers": ["a"]}]}'),
    ("headers-string", b'{"records": [{"value": 1, "headers": "a=b"}]}'),
    ("header-value-number", b'{"records": [{"value": 1, "headers": {"a": 1}}]}'),
    ("header-value-null", b'{"records": [{"value": 1, "headers": {"a": null}}]}'),
    ("partition-string", b'{"records": [{"value": 1, "partition": "0"}]}'),
    ("partition-float", b'{"records": [{"value": 1, "partition": 0.5}]}'),
    ("partition-bool", b'{"records": [{"value": 1, "partition": true}]}'),
    ("timestamp-string", b'{"records": [{"value": 1, "timestamp": "now"}]}'),
    ("timestamp-negative", b'{"records": [{"value": 1, "timestamp": -1}]}'),
    ("timestamp-float", b'{"records": [{"value": 1, "timestamp": 1.5}]}'),
    ("timestamp-huge", b'{"records": [{"value": 1, "timestamp": 99999999999999999999}]}'),
    ("timestamp-bool", b'{"records": [{"value": 1, "timestamp": false}]}'),
    ("good-then-bad", b'{"records": [{"value": "ok"}, {"value": 1, "key": 3}]}'),
    ("deep-nesting", b'{"records": [{"value": ' + b"[" * 2000 + b"]" * 2000 + b"}]}"),
]


@pytest.mark.parametrize(
    "body", [b for _, b in BAD_JSON_BODIES], ids=[n for n, _ in BAD_JSON_BODIES]
)
def test_bad_json_produce_is_400(http: httpx.Client, body: bytes) -> None:
    assert_problem(http.post(RECORDS, content=body, headers=JSON), 400, "INVALID_REQUEST")
    p0 = f"/v1/topics/{KNOWN_TOPIC}/partitions/0/records"
    assert_problem(http.post(p0, content=body, headers=JSON), 400, "INVALID_REQUEST")


BAD_NDJSON_BODIES: list[tuple[str, bytes]] = [
    ("bad-line", b'{"value": 1}\n{"value": \n{"value": 3}\n'),
    ("line-not-object", b'{"value": 1}\n[1]\n'),
    ("line-is-number", b"7\n"),
    ("unknown-field", b'{"value": 1, "nope": 1}\n'),
    ("key-number", b'{"value": 1}\n{"key": 1, "value": 2}\n'),
    ("only-blank", b"\n\n  \n"),
    ("json-document-not-lines", b'{"records": [{"value": 1}]}'),
]


@pytest.mark.parametrize(
    "body", [b for _, b in BAD_NDJSON_BODIES], ids=[n for n, _ in BAD_NDJSON_BODIES]
)
def test_bad_ndjson_produce_is_400(http: httpx.Client, body: bytes) -> None:
    assert_problem(http.post(RECORDS, content=body, headers=NDJSON), 400, "INVALID_REQUEST")


def test_ndjson_error_names_the_bad_line(http: httpx.Client) -> None:
    body = b'{"value": 1}\n{"value": 2}\n{"value": oops}\n'
    problem = assert_problem(
        http.post(RECORDS, content=body, headers=NDJSON), 400, "INVALID_REQUEST"
    )
    assert "line 3" in problem["detail"]


@pytest.mark.parametrize(
    "ctype", ["text/plain", "application/xml", "multipart/form-data; boundary=x", "image/png"]
)
def test_unsupported_content_type_is_415(http: httpx.Client, ctype: str) -> None:
    resp = http.post(
        RECORDS, content=b'{"records": [{"value": 1}]}', headers={"content-type": ctype}
    )
    assert_problem(resp, 415, "UNSUPPORTED_MEDIA_TYPE")


def test_record_partition_out_of_range_is_404(http: httpx.Client) -> None:
    body = b'{"records": [{"value": 1, "partition": 2}]}'
    assert_problem(http.post(RECORDS, content=body, headers=JSON), 404, "PARTITION_NOT_FOUND")
    body = b'{"records": [{"value": 1, "partition": -1}]}'
    assert_problem(http.post(RECORDS, content=body, headers=JSON), 404, "PARTITION_NOT_FOUND")


def test_record_partition_conflicting_with_url_is_400(http: httpx.Client) -> None:
    body = b'{"records": [{"value": 1, "partition": 1}]}'
    url = f"/v1/topics/{KNOWN_TOPIC}/partitions/0/records"
    assert_problem(http.post(url, content=body, headers=JSON), 400, "INVALID_REQUEST")


# ---- unknown things --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("POST", "/v1/topics/no-such-topic/records", 404, "TOPIC_NOT_FOUND"),
        ("POST", "/v1/topics/no-such-topic/partitions/0/records", 404, "TOPIC_NOT_FOUND"),
        ("GET", "/v1/topics/no-such-topic/partitions/0/records", 404, "TOPIC_NOT_FOUND"),
        ("GET", "/v1/topics/no-such-topic/partitions/0", 404, "TOPIC_NOT_FOUND"),
        ("GET", "/v1/topics/no-such-topic", 404, "TOPIC_NOT_FOUND"),
        ("DELETE", "/v1/topics/no-such-topic", 404, "TOPIC_NOT_FOUND"),
        ("POST", f"/v1/topics/{KNOWN_TOPIC}/partitions/2/records", 404, "PARTITION_NOT_FOUND"),
        ("POST", f"/v1/topics/{KNOWN_TOPIC}/partitions/-1/records", 404, "PARTITION_NOT_FOUND"),
        ("GET", f"/v1/topics/{KNOWN_TOPIC}/partitions/2/records", 404, "PARTITION_NOT_FOUND"),
        ("GET", f"/v1/topics/{KNOWN_TOPIC}/partitions/99/records", 404, "PARTITION_NOT_FOUND"),
        ("GET", f"/v1/topics/{KNOWN_TOPIC}/partitions/-1/records", 404, "PARTITION_NOT_FOUND"),
        ("GET", f"/v1/topics/{KNOWN_TOPIC}/partitions/2", 404, "PARTITION_NOT_FOUND"),
        ("GET", f"/v1/topics/{KNOWN_TOPIC}/partitions/x/records", 400, "INVALID_REQUEST"),
        ("GET", "/v2/nothing", 404, "NOT_FOUND"),
        ("GET", "/v1/topics/a/b/c/d/e", 404, "NOT_FOUND"),
        ("PUT", "/v1/topics", 405, "METHOD_NOT_ALLOWED"),
        ("PATCH", f"/v1/topics/{KNOWN_TOPIC}", 405, "METHOD_NOT_ALLOWED"),
        ("DELETE", f"/v1/topics/{KNOWN_TOPIC}/partitions/0/records", 405, "METHOD_NOT_ALLOWED"),
        ("POST", "/healthz", 405, "METHOD_NOT_ALLOWED"),
    ],
)
def test_unknown_resources_and_methods(
    http: httpx.Client, method: str, path: str, status: int, code: str
) -> None:
    body = b'{"records": [{"value": 1}]}' if method in ("POST", "PUT", "PATCH") else None
    resp = http.request(method, path, content=body, headers=JSON if body else {})
    assert_problem(resp, status, code)


def test_unknown_topic_wins_over_a_bad_body(http: httpx.Client) -> None:
    """The resource is checked first: a malformed body to a missing topic is still a 404."""
    resp = http.post("/v1/topics/no-such-topic/records", content=b"{", headers=JSON)
    assert_problem(resp, 404, "TOPIC_NOT_FOUND")


# ---- parameters ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"max_records": -1},
        {"max_records": 0},
        {"max_records": "abc"},
        {"max_records": "1.5"},
        {"max_bytes": -1},
        {"max_bytes": 0},
        {"max_bytes": "lots"},
        {"offset": -5},
        {"offset": "abc"},
        {"offset": "1e3"},
        {"offset": "0x10"},
        {"offset": ""},
        {"max_wait_ms": -1},
        {"max_wait_ms": "soon"},
        {"isolation": "bogus"},
        {"timestamp": -1},
        {"timestamp": "yesterday"},
        {"offset": 0, "timestamp": 0},
    ],
    ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()),
)
def test_bad_fetch_parameters_are_400(http: httpx.Client, params: dict[str, Any]) -> None:
    assert_problem(http.get(FETCH, params=params), 400, "INVALID_REQUEST")


@pytest.mark.parametrize(
    "params",
    [
        {"acks": "bogus"},
        {"acks": ""},
        {"acks": "1"},
        {"timeout_ms": "x"},
        {"timeout_ms": -1},
        {"timeout_ms": "1.5"},
    ],
    ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()),
)
def test_bad_produce_parameters_are_400(http: httpx.Client, params: dict[str, Any]) -> None:
    body = b'{"records": [{"value": "must not land"}]}'
    assert_problem(
        http.post(RECORDS, params=params, content=body, headers=JSON), 400, "INVALID_REQUEST"
    )
    url = f"/v1/topics/{KNOWN_TOPIC}/partitions/1/records"
    assert_problem(
        http.post(url, params=params, content=body, headers=JSON), 400, "INVALID_REQUEST"
    )


@pytest.mark.parametrize("offset", [21, 10**6, 2**63 - 1])
def test_offset_past_the_end_is_416_with_range(http: httpx.Client, offset: int) -> None:
    problem = assert_problem(http.get(FETCH, params={"offset": offset}), 416, "OFFSET_OUT_OF_RANGE")
    assert problem["log_start_offset"] == 0
    assert problem["high_watermark"] == 20


def test_huge_offset_is_a_4xx_not_a_500(http: httpx.Client) -> None:
    resp = http.get(FETCH, params={"offset": 2**70})
    assert resp.status_code in (400, 416), resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")


def test_huge_numeric_parameters_are_4xx(http: httpx.Client) -> None:
    for params in ({"max_records": 2**70}, {"max_bytes": 2**70}, {"max_wait_ms": 2**70}):
        resp = http.get(FETCH, params=params)
        assert resp.status_code < 500, (params, resp.text)
    resp = http.get(f"/v1/topics/{KNOWN_TOPIC}/partitions/{2**70}/records")
    assert resp.status_code in (400, 404), resp.text


# ---- the stored data survived ----------------------------------------------------------


def test_known_records_read_back_intact_after_the_barrage(
    http: httpx.Client, stored: dict[int, list[dict[str, Any]]]
) -> None:
    """Runs after the barrage (pytest keeps file order): nothing above changed the log."""
    for p, before in stored.items():
        assert [(r["key"], r["value"]) for r in before] == [
            (x["key"], x["value"]) for x in KNOWN[p]
        ]
        assert read_all(http, KNOWN_TOPIC, p) == before
    desc = http.get(f"/v1/topics/{KNOWN_TOPIC}").json()
    assert [(p["high_watermark"], p["log_end_offset"]) for p in desc["partitions"]] == [
        (20, 20),
        (20, 20),
    ]


# ---- body size limit (its own node with a small limit) ---------------------------------

LIMIT = 4096


@pytest.fixture(scope="module")
def small_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    n = NodeProcess(
        tmp_path_factory.mktemp("small") / "data", env={"TIDELOG_MAX_REQUEST_BYTES": str(LIMIT)}
    ).start()
    with httpx.Client(base_url=n.url) as c:
        assert c.post("/v1/topics", json={"name": "small"}).status_code == 201
    yield n
    n.kill()


def _body_of(size: int) -> bytes:
    """A valid produce body of exactly ``size`` bytes."""
    head, tail = b'{"records": [{"value": "', b'"}]}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def _chunks(data: bytes, n: int = 1000) -> Iterator[bytes]:
    for i in range(0, len(data), n):
        yield data[i : i + n]


@pytest.mark.parametrize("size", [LIMIT + 1, 4 * LIMIT, 200 * LIMIT])
def test_oversize_body_is_413_with_content_length(small_node: NodeProcess, size: int) -> None:
    with httpx.Client(base_url=small_node.url, timeout=30) as c:
        resp = c.post("/v1/topics/small/records", content=_body_of(size), headers=JSON)
        assert_problem(resp, 413, "RECORD_TOO_LARGE")
        assert read_all(c, "small", 0) == []


@pytest.mark.parametrize("size", [LIMIT + 1, 4 * LIMIT, 200 * LIMIT])
def test_oversize_body_is_413_when_chunked(small_node: NodeProcess, size: int) -> None:
    with httpx.Client(base_url=small_node.url, timeout=30) as c:
        resp = c.post("/v1/topics/small/records", content=_chunks(_body_of(size)), headers=JSON)
        assert "content-length" not in resp.request.headers
        assert resp.request.headers.get("transfer-encoding") == "chunked"
        assert_problem(resp, 413, "RECORD_TOO_LARGE")
        assert read_all(c, "small", 0) == []


def test_oversize_topic_create_is_413(small_node: NodeProcess) -> None:
    body = b'{"name": "' + b"n" * LIMIT + b'"}'
    with httpx.Client(base_url=small_node.url) as c:
        assert_problem(c.post("/v1/topics", content=body, headers=JSON), 413, "RECORD_TOO_LARGE")


def test_body_at_the_limit_is_accepted_both_ways(small_node: NodeProcess) -> None:
    with httpx.Client(base_url=small_node.url, timeout=30) as c:
        before = len(read_all(c, "small", 0))
        r = c.post("/v1/topics/small/records", content=_body_of(LIMIT), headers=JSON)
        assert r.status_code == 200, r.text
        r = c.post("/v1/topics/small/records", content=_chunks(_body_of(LIMIT)), headers=JSON)
        assert r.status_code == 200, r.text
        got = read_all(c, "small", 0)
        assert len(got) == before + 2
        # The node still serves normally on the same connection pool after refusals.
        assert c.get("/healthz").status_code == 200


def test_oversize_then_normal_on_one_connection(small_node: NodeProcess) -> None:
    """A refused body does not poison the connection for the next request."""
    with httpx.Client(base_url=small_node.url, timeout=30) as c:
        for _ in range(3):
            resp = c.post(
                "/v1/topics/small/records", content=_chunks(_body_of(3 * LIMIT)), headers=JSON
            )
            assert_problem(resp, 413, "RECORD_TOO_LARGE")
            ok = c.post("/v1/topics/small/records", json={"records": [{"value": "fine"}]})
            assert ok.status_code == 200, ok.text
