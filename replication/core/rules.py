"""Settings of the partition protocol, and the safety rules the simulator can switch off.

``SafetyRules`` exists for one reason: to prove the simulator's checker can
fail. Every field defaults to on; production code never changes them. Tests in
``tests/sim`` switch one off at a time and require a named invariant to break.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    """Timeouts and bounds of partition replication (all milliseconds or records).

    ``replica_lag_time_ms``: a follower whose last caught-up time is older is
    removed from the ISR (Kafka ``replica.lag.time.max.ms``), and a replica
    not heard from for this long leaves the LRS.
    ``replica_lag_max_records``: a follower more than this many records
    behind the leader's LEO is removed from the ISR (Fluvio's record bound);
    0 disables the bound.
    ``leader_timeout_ms``: a follower without a successful fetch for this long
    reports its leader as suspect, and repeats the report at this interval.
    ``alter_partition_retry_ms``: an AlterPartition without an answer is sent
    again after this long (the network may drop it).
    """

    replica_lag_time_ms: int = 10_000
    replica_lag_max_records: int = 0
    leader_timeout_ms: int = 5_000
    alter_partition_retry_ms: int = 2_000


@dataclass(frozen=True, slots=True)
class SafetyRules:
    """Switches for the rules a fault-injection test may disable (all on by default).

    ``hw_over_maximal_isr``: HW is the minimum over the Maximal ISR (seed 001
    §6.5.2); off: over the committed ISR only.
    ``truncate_by_leader_epoch``: followers truncate to the diverging epoch's
    end offset (KIP-101, seed 001 §6.6); off: they truncate to their local HW
    on a leader change and on a divergence answer.
    ``expansion_requires_caught_up``: ISR expansion needs the three conditions
    of §6.5.3/§6.5.4; off: any replica that fetches joins.
    ``partition_epoch_check``: AlterPartition answers and metadata are matched
    to the partition epoch (§6.3 rule 4). The simulator's controller harness
    honours the same switch by not checking the request's partition epoch.
    ``applied_hw_rule``: the HW shown to consumers is "unknown" until it
    reaches LESO (§6.4.2); off: the raw local HW.
    """

    hw_over_maximal_isr: bool = True
    truncate_by_leader_epoch: bool = True
    expansion_requires_caught_up: bool = True
    partition_epoch_check: bool = True
    applied_hw_rule: bool = True


ALL_ON = SafetyRules()
