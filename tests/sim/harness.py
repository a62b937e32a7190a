"""Helpers shared by the simulator's pytest tests and its command line."""

from __future__ import annotations

from dataclasses import fields, replace

from replication.core.rules import SafetyRules
from tests.sim.world import SimConfig, SimResult, run_seed

RULES = tuple(f.name for f in fields(SafetyRules))


def config_without(rule: str, base: SimConfig | None = None) -> SimConfig:
    """``base`` with one safety rule switched off."""
    assert rule in RULES, rule
    base = base or SimConfig()
    return replace(base, rules=replace(base.rules, **{rule: False}))


def replay_command(seed: int, cfg: SimConfig) -> str:
    """The command that replays ``seed`` under ``cfg`` with its full trace."""
    off = [f"--disable {r}" for r in RULES if not getattr(cfg.rules, r)]
    shape = (
        f"--brokers {cfg.brokers} --partitions {cfg.partitions} "
        f"--duration-ms {cfg.duration_ms}"
    )
    return " ".join(["python -m tests.sim --seed", str(seed), shape, *off, "--trace"])


def first_violation(seeds: range, cfg: SimConfig) -> SimResult | None:
    """Run seeds in order; the first result with a violation, or None."""
    for seed in seeds:
        result = run_seed(seed, cfg)
        if result.violation is not None:
            return result
    return None


def assert_no_violation(seeds: range, cfg: SimConfig) -> int:
    """Run every seed; fail with the seed, trace and replay command on a violation."""
    events = 0
    for seed in seeds:
        result = run_seed(seed, cfg)
        if result.violation is not None:
            raise AssertionError(
                f"{result.report()}\nreplay: {replay_command(seed, cfg)}"
            )
        events += result.events
    return events
