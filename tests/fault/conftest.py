"""Fault-suite fixtures: skip without root/netns, run a scenario, keep its artifacts.

Artifacts (history.jsonl, summary.txt, node logs) go to the test's ``tmp_path``,
or under ``$TIDELOG_FAULT_ARTIFACTS`` when set (CI can upload that directory).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fault.netns import unavailable_reason
from tests.fault.runner import RunConfig, RunResult, run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("TIDELOG_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow fault run: set TIDELOG_SLOW=1 (./dev test-all) or -m slow")
    selected_slow = "slow" in (config.getoption("-m") or "") and "not slow" not in (config.getoption("-m") or "")
    for item in items:
        if "slow" in item.keywords and str(item.fspath).startswith(os.path.dirname(__file__)) \
                and not selected_slow:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def netns_ok() -> None:
    why = unavailable_reason()
    if why is not None:
        pytest.skip(f"fault suite needs network namespaces: {why}")


@pytest.fixture
def fault_run(netns_ok: None, tmp_path: Path, request: pytest.FixtureRequest) -> Callable[..., RunResult]:
    """Run a :class:`RunConfig` (keyword arguments) and print its summary (shown on failure)."""
    base = Path(os.environ["TIDELOG_FAULT_ARTIFACTS"]) / request.node.name \
        if os.environ.get("TIDELOG_FAULT_ARTIFACTS") else tmp_path / "artifacts"

    def go(**kw: Any) -> RunResult:
        res = run(RunConfig(artifacts=base, **kw))
        print(res.summary)
        return res

    return go


def assert_safe_and_live(res: RunResult) -> None:
    """The verdict every fault test asserts: zero safety violations, recovered after healing."""
    assert res.report.ok and not res.liveness, res.summary
    for p in res.report.partitions:
        assert p.acked > 0 and p.final_len >= p.acked, res.summary
        assert p.consumed == p.final_len, f"consumer of p{p.partition} did not reach the end\n{res.summary}"
