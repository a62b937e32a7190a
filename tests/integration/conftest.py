"""Helpers for API tests against a real ``tidelog serve`` process.

One node per test module (``shared_node``) keeps the suite fast on two cores;
tests that share it use fresh topic names (``topic_name``) so they never see
each other's data. Tests that restart, kill or reconfigure a node use the
function-scoped ``node`` / ``node_factory`` fixtures from the top conftest.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.node import NodeProcess

PROBLEM = "application/problem+json"

_names = itertools.count()


@pytest.fixture(scope="module")
def shared_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One default node for every test of a module; killed at module teardown."""
    base = tmp_path_factory.mktemp("shared")
    n = NodeProcess(base / "data").start()
    yield n
    if n.alive:
        n.kill()


@pytest.fixture(scope="module")
def http(shared_node: NodeProcess) -> Iterator[httpx.Client]:
    """Raw HTTP against the shared node, for requests the typed client would not send.

    Module-scoped: building an httpx client costs ~80 ms (its SSL context), which
    adds up over a few hundred parametrized cases.
    """
    with httpx.Client(base_url=shared_node.url, timeout=30.0) as c:
        yield c


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[], str]:
    """Fresh, valid topic names derived from the test name (unique within the session)."""
    stem = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:80]

    def make() -> str:
        return f"{stem}-{next(_names)}"

    return make


def assert_problem(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is an RFC 9457 problem with this status and stable code; returns the body."""
    assert resp.status_code == status, f"{resp.status_code} {resp.text[:500]}"
    ctype = resp.headers.get("content-type", "").split(";", 1)[0].strip()
    assert ctype == PROBLEM, f"content-type {ctype!r}: {resp.text[:300]}"
    body = resp.json()
    assert body["code"] == code, body
    assert body["status"] == status, body
    assert {"type", "title", "detail"} <= body.keys(), body
    return body


def wait_until(pred: Callable[[], Any], timeout_s: float = 20.0, what: str = "condition") -> Any:
    """Poll ``pred`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.02)


def read_all(
    c: httpx.Client, topic: str, partition: int, isolation: str = "committed"
) -> list[dict[str, Any]]:
    """Every record of a partition from the log start, page by page."""
    out: list[dict[str, Any]] = []
    offset: int | str = "earliest"
    while True:
        r = c.get(
            f"/v1/topics/{topic}/partitions/{partition}/records",
            params={"offset": offset, "max_records": 5000, "isolation": isolation},
        )
        assert r.status_code == 200, r.text
        page = r.json()
        out.extend(page["records"])
        if not page["records"]:
            return out
        offset = page["next_offset"]


def newest_segment(data_dir: Path, topic: str, partition: int) -> Path:
    """The active segment file of a partition (the ``*.log`` with the largest base offset)."""
    pdir = data_dir / "logs" / f"{topic}-{partition}"
    logs = sorted(pdir.glob("*.log"), key=lambda p: int(p.stem))
    assert logs, f"no segments in {pdir}"
    return logs[-1]
