"""Browser tests: the dashboard in real headless Chromium (Playwright) against real nodes.

Playwright drives the Debian ``chromium`` package (``/usr/bin/chromium``, or
``TIDELOG_CHROMIUM``); ``playwright install`` is never needed. Every test gets
a fresh browser profile. Screenshots go to ``test-artifacts/screenshots/`` (or
``TIDELOG_SCREENSHOT_DIR``), which git ignores.

Waits poll the page (or the API) with a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.support.node import ClusterProcesses
from tests.support.waiting import eventually as _eventually

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TIDELOG_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}

# Short liveness timeouts so failures show in seconds. The session outlasts the replica
# lag time: a dead follower leaves the LRS (3 s unheard) before the controller could
# fence it out of the ISR, so "LRS, then ISR" is the protocol's order, not a race.
FAST_ENV = {
    "TIDELOG_SESSION_TIMEOUT_MS": "6000",
    "TIDELOG_HEARTBEAT_INTERVAL_MS": "300",
    "TIDELOG_REPLICA_LAG_TIME_MS": "3000",
    "TIDELOG_LEADER_TIMEOUT_MS": "2000",
    "TIDELOG_ELECTION_TIMEOUT_MS": "3000",
    "TIDELOG_METADATA_WAIT_MS": "2000",
}


def eventually(fn: Callable[[], T | None], timeout_s: float = 45.0, what: str = "") -> T:
    """``tests.support.waiting.eventually`` with the longer deadline a page under load needs."""
    return _eventually(fn, timeout_s, what, poll_s=0.1)


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    d = Path(os.environ.get("TIDELOG_SCREENSHOT_DIR", ROOT / "test-artifacts" / "screenshots"))
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture
def browser_context(tmp_path: Path) -> Iterator[Any]:
    """A fresh persistent Chromium profile (laptop viewport) for one test."""
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        pytest.fail(f"chromium not found at {CHROMIUM} (./dev test installs the Debian package)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS, viewport=LAPTOP,
        )
        ctx.set_default_timeout(30_000)
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = ClusterProcesses(tmp_path, 3, env=FAST_ENV)
    c.start()
    yield c
    c.kill_all()


def describe(url: str, topic: str, partition: int) -> dict[str, Any]:
    return httpx.get(f"{url}/v1/topics/{topic}/partitions/{partition}", timeout=2.0) \
        .raise_for_status().json()


def create_rf3(c: ClusterProcesses, topic: str, partitions: int) -> None:
    """An RF=3 topic (min ISR 2), every partition fully in sync as its leader says."""
    def controller() -> bool:
        ids = {httpx.get(f"{n.url}/v1/cluster", timeout=2).json()["controller"]["node_id"]
               for n in c.nodes if n.alive}
        return len(ids) == 1 and None not in ids

    eventually(controller, what="one active controller")
    with c.node(1).client() as cl:
        cl.create_topic(topic, partitions=partitions, replication_factor=3,
                        config={"min_insync_replicas": 2})
    for p in range(partitions):
        eventually(lambda p=p: (s := leader_view(c, topic, p)) and len(s["isr"]) == 3
                   and len(s["lrs"]) == 3, what=f"{topic}/{p} in sync")


def leader_view(c: ClusterProcesses, topic: str, partition: int) -> dict[str, Any] | None:
    """The partition state as its leader itself reports it (None while there is none)."""
    leader = describe(c.node(1).url if c.node(1).alive else c.nodes[1].url, topic, partition)["leader"]
    if leader is None or not c.node(leader).alive:
        return None
    s = describe(c.node(leader).url, topic, partition)
    return s if s["leader"] == leader and s["state_from"] == leader else None
