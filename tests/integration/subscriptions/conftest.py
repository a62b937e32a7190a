"""Fixtures for push subscription tests: nodes that may deliver to loopback, receivers.

Nodes here set ``TIDELOG_WEBHOOK_ALLOWED_NETWORKS=127.0.0.0/8`` (loopback is
refused by default, see ``app/subscriptions/ssrf.py``) and a short cursor
commit interval, so a kill -9 loses little progress and tests stay quick.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.support.node import NodeProcess

PUSH_ENV = {
    "TIDELOG_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
    "TIDELOG_WEBHOOK_CURSOR_COMMIT_MS": "100",
}
FAST_RETRY = {"retry_backoff_ms": 20, "retry_backoff_max_ms": 200}




@pytest.fixture
def push_node(node_factory: Callable[..., NodeProcess]) -> NodeProcess:
    """A node of its own, for tests that kill, restart or reconfigure it."""
    return node_factory(env=PUSH_ENV)


@pytest.fixture(scope="module")
def shared_push_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One node for the tests of a module that leave it running (each uses its own topics)."""
    n = NodeProcess(tmp_path_factory.mktemp("push") / "data", env=PUSH_ENV).start()
    yield n
    if n.alive:
        n.kill()


def create_subscription(node_url: str, /, **body: Any) -> dict[str, Any]:
    r = httpx.post(f"{node_url}/v1/subscriptions", json=body, timeout=30)
    assert r.status_code == 201, r.text
    return r.json()


def subscription(url: str, sid: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/subscriptions/{sid}", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def produce(url: str, topic: str, values: list[Any], partition: int | None = None) -> list[dict[str, Any]]:
    path = f"/v1/topics/{topic}/records" if partition is None else f"/v1/topics/{topic}/partitions/{partition}/records"
    r = httpx.post(url + path, json={"records": [{"value": v} for v in values]}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["offsets"]


def wait_status(url: str, sid: str, pred: Callable[[dict[str, Any]], bool], timeout_s: float = 30.0,
                what: str = "status") -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = subscription(url, sid)
        if pred(last):
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last: {last}")
