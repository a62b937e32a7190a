"""Focused fault scenarios on a real 3-node cluster, each checked for every acknowledged write.

Each test is one run of ``tests.fault.runner`` with a schedule from
``scenarios.py``; the summary (printed, shown on failure) names the artifacts
directory with the history and node logs. Nothing here asserts on timing:
unavailability windows are printed, not judged.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest

from tests.fault.conftest import assert_safe_and_live
from tests.fault.runner import RunResult
from tests.fault.scenarios import SCENARIOS

Run = Callable[..., RunResult]


def test_kill_9_and_sigstop_of_leaders_followers_and_the_controller_lose_no_acked_write(
    fault_run: Run,
) -> None:
    res = fault_run(seed=101, scenario="processes")
    assert_safe_and_live(res)
    assert [f["kind"] for f in res.report.faults] == [s.kind for s in SCENARIOS["processes"]]


def test_isolation_one_way_pairwise_and_raft_only_cuts_lose_no_acked_write(fault_run: Run) -> None:
    res = fault_run(seed=102, scenario="network")
    assert_safe_and_live(res)
    assert [f["kind"] for f in res.report.faults] == [s.kind for s in SCENARIOS["network"]]


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 150 s of faults take ~4 min; TIDELOG_FAULT_DURATION can ask for much more
def test_randomized_nemesis_loses_no_acked_write(fault_run: Run) -> None:
    """A seeded random schedule of every fault kind; ``TIDELOG_FAULT_SEED`` replays one."""
    seed = int(os.environ.get("TIDELOG_FAULT_SEED") or random.SystemRandom().randrange(1 << 31))
    duration = float(os.environ.get("TIDELOG_FAULT_DURATION", "150"))
    print(f"fault nemesis seed={seed} duration={duration:g}s")
    assert_safe_and_live(fault_run(seed=seed, duration_s=duration))
