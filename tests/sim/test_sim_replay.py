"""A seed replays exactly: same events, same trace, same outcome."""

from __future__ import annotations

from tests.sim.harness import config_without, replay_command
from tests.sim.world import SimConfig, run_seed


def test_the_same_seed_replays_the_same_run() -> None:
    a, b = run_seed(7), run_seed(7)
    assert (a.events, a.committed, a.records_acked, a.faults) == (
        b.events,
        b.committed,
        b.records_acked,
        b.faults,
    )
    assert a.trace == b.trace


def test_a_violation_reports_its_seed_trace_and_replay_command() -> None:
    cfg = config_without("expansion_requires_caught_up")
    first = run_seed(0, cfg)
    again = run_seed(0, cfg)
    assert first.violation is not None
    assert str(first.violation) == str(again.violation)
    report = first.report()
    assert report.startswith("seed 0: ") and "last events" in report
    assert "--disable expansion_requires_caught_up" in replay_command(0, cfg)


def test_different_seeds_take_different_paths() -> None:
    cfg = SimConfig(duration_ms=1_000)
    assert run_seed(1, cfg).trace != run_seed(2, cfg).trace
