"""The checker can fail: switch off one safety rule at a time and the simulator
finds a violation within a bounded number of seeds (the same code paths run;
only the ``SafetyRules`` switch differs).

Each rule is searched on the cluster shape where its failure is most frequent
(measured: ISR and leader churn is higher with 5 brokers and 3 partitions;
consumers meet new leaders more often with 3 brokers and 1 partition).
"""

from __future__ import annotations

import pytest

from tests.sim import checker as C
from tests.sim.harness import config_without, first_violation, replay_command
from tests.sim.world import SimConfig

MAX_SEEDS = 60

WIDE = SimConfig(brokers=5, partitions=3, duration_ms=4_000)
SMALL = SimConfig()

CASES = {
    # HW on the ISR alone: a replica the controller just added lacks committed records.
    "hw_over_maximal_isr": (WIDE, {C.LEADER_CANDIDATE_COMPLETENESS, C.UNCLEAN_EXCLUSION}),
    # Truncating to a stale local HW drops committed records from an ISR member.
    "truncate_by_leader_epoch": (WIDE, {C.LEADER_CANDIDATE_COMPLETENESS, C.LEADER_COMPLETENESS}),
    # A lagging or unclean replica enters the ISR.
    "expansion_requires_caught_up": (
        SMALL,
        {C.LEADER_CANDIDATE_COMPLETENESS, C.UNCLEAN_EXCLUSION},
    ),
    # Stale AlterPartition requests and answers are applied: the leader's ISR and
    # the controller's drift apart.
    "partition_epoch_check": (
        WIDE,
        {C.LEADER_CANDIDATE_COMPLETENESS, C.UNCLEAN_EXCLUSION, C.LEADER_COMPLETENESS},
    ),
    # A new leader shows its stale local HW to consumers (seed 001 §6.4.1).
    "applied_hw_rule": (SMALL, {C.HW_MONOTONIC}),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_switching_off_a_safety_rule_is_caught_within_a_bounded_number_of_seeds(
    rule: str,
) -> None:
    base, expected = CASES[rule]
    cfg = config_without(rule, base)
    result = first_violation(range(MAX_SEEDS), cfg)
    assert result is not None, f"no violation in {MAX_SEEDS} seeds with {rule} off"
    assert result.violation is not None
    assert result.violation.invariant in expected, (
        f"{result.report()}\nreplay: {replay_command(result.seed, cfg)}"
    )
