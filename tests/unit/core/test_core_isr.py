"""ISR expansion, shrink, pending AlterPartition states and the controller's answers.

Seed 001 §6.3 rule 4 (partition epoch), §6.5.1 case 3 (broker epochs of added
replicas), §6.5.2 (pending changes, commit or roll back), §6.5.3/§6.5.4 (the
three expansion conditions); seed 002 (record-count lag bound, LRS).
"""

from __future__ import annotations

from dataclasses import replace

from core_support import SETTINGS, append, fetch, leader, log_of

from replication.core.actions import SendAlterPartition
from replication.core.pending import PendingExpand, PendingShrink
from replication.core.rules import SafetyRules


def _expansions(actions: list[object]) -> list[SendAlterPartition]:
    return [a for a in actions if isinstance(a, SendAlterPartition)]


# ---------------------------------------------------------------- expansion
def test_follower_that_reached_hw_and_leso_in_this_epoch_is_proposed_for_the_isr() -> None:
    log = log_of(0, 0)
    s = leader(log, isr=(1, 2), epoch=1, partition_epoch=4)
    s.handle_fetch(fetch(2, 2, epoch=1), log, 1)
    _, actions = s.handle_fetch(fetch(3, 2, epoch=1, broker_epoch=9), log, 2)
    assert actions == [SendAlterPartition(1, 4, (1, 2, 3), {3: 9})]
    assert isinstance(s.pending, PendingExpand) and s.pending.added == 3


def test_follower_below_the_local_hw_is_not_added() -> None:
    log = log_of()
    s = leader(log, isr=(1, 2), min_isr=1)
    append(log, s, 4)
    s.handle_fetch(fetch(2, 4), log, 1)
    assert s.high_watermark == 4
    _, actions = s.handle_fetch(fetch(3, 3), log, 2)
    assert _expansions(actions) == []


def test_follower_below_leso_is_not_added_even_at_the_stale_local_hw() -> None:
    """§6.5.3: a new leader's local HW may be stale; reaching it is not enough."""
    log = log_of(0, 0, 0, 0)
    s = leader(log, isr=(1, 2), epoch=1, hw=1)
    assert s.leader_epoch_start_offset == 4
    _, actions = s.handle_fetch(fetch(3, 2, epoch=1), log, 1)
    assert _expansions(actions) == []
    _, actions = s.handle_fetch(fetch(3, 4, epoch=1), log, 2)
    assert _expansions(actions) != []


def test_follower_must_have_fetched_in_the_current_leader_epoch() -> None:
    """§6.5.4: progress learned before a reassignment or in an older epoch does not count."""
    log = log_of(0, 0)
    s = leader(log, isr=(1, 2), epoch=1)
    # Progress as if 3 had reached LESO in an earlier epoch.
    p = s.replicas[3]
    p.log_end_offset, p.fetch_leader_epoch, p.broker_epoch = 2, 0, 7
    s._sync_log(log)
    assert s._maybe_expand(p, 5) is None
    _, actions = s.handle_fetch(fetch(3, 2, epoch=1), log, 6)
    assert _expansions(actions) != []


def test_follower_too_many_records_behind_is_not_added() -> None:
    log = log_of()
    s = leader(
        log, isr=(1,), min_isr=2, settings=replace(SETTINGS, replica_lag_max_records=5)
    )
    append(log, s, 20)
    _, actions = s.handle_fetch(fetch(2, 0), log, 1)  # at HW 0 and LESO 0, but 20 behind
    assert _expansions(actions) == []
    _, actions = s.handle_fetch(fetch(2, 16), log, 2)
    assert _expansions(actions) != []


def test_unclean_replica_joins_at_once_when_the_expansion_checks_are_switched_off() -> None:
    log = log_of()
    s = leader(log, isr=(1, 2), min_isr=1, rules=SafetyRules(expansion_requires_caught_up=False))
    append(log, s, 5)
    s.handle_fetch(fetch(2, 5), log, 1)
    _, actions = s.handle_fetch(fetch(3, 0), log, 2)
    assert _expansions(actions) != []


def test_only_one_alter_partition_is_in_flight() -> None:
    log = log_of()
    s = leader(log, isr=(1,), min_isr=1)
    s.handle_fetch(fetch(2, 0), log, 1)
    _, actions = s.handle_fetch(fetch(3, 0), log, 2)
    assert _expansions(actions) == []
    assert s.proposed_isr == (1, 2)


# ---------------------------------------------------------------- answers
def test_accepted_expansion_is_committed_with_the_new_partition_epoch() -> None:
    log = log_of()
    s = leader(log, isr=(1, 2), partition_epoch=3)
    s.handle_fetch(fetch(3, 0), log, 1)
    s.on_alter_partition_result(isr=(1, 2, 3), partition_epoch=4)
    assert (s.isr, s.partition_epoch, s.pending, s.proposed_isr) == ((1, 2, 3), 4, None, None)


def test_refused_expansion_of_an_ineligible_replica_is_rolled_back() -> None:
    """§6.5.1 case 3: the controller refuses a stale broker epoch; roll back the ISR."""
    log = log_of()
    s = leader(log, isr=(1, 2))
    s.handle_fetch(fetch(3, 0), log, 1)
    s.on_alter_partition_result(error="INELIGIBLE_REPLICA")
    assert (s.isr, s.pending, s.proposed_isr) == ((1, 2), None, None)


def test_refused_replica_still_counts_for_hw_until_the_partition_epoch_moves() -> None:
    """A retried copy of the refused request may still be in flight and be accepted
    at the same partition epoch (the replica got unfenced meanwhile): until the
    epoch moves on, the HW must not pass what that replica has (found by tests/sim)."""
    log = log_of()
    s = leader(log, isr=(1, 2), min_isr=2, partition_epoch=4)
    s.handle_fetch(fetch(3, 0), log, 1)
    s.on_alter_partition_result(error="INELIGIBLE_REPLICA")
    assert s.maximal_isr == (1, 2, 3)
    append(log, s, 3)
    s.handle_fetch(fetch(2, 3), log, 2)
    assert s.high_watermark == 0  # 3 could be in the controller's ISR any moment
    s.on_metadata(isr=(1, 2), partition_epoch=5)  # any committed change fences the copy
    assert s.maximal_isr == (1, 2) and s.high_watermark == 3


def test_stale_partition_epoch_answer_keeps_the_maximal_isr_until_metadata_arrives() -> None:
    """An earlier copy of the request may have committed: keep ISR ∪ proposed."""
    log = log_of()
    s = leader(log, isr=(1, 2), partition_epoch=3)
    s.handle_fetch(fetch(3, 0), log, 1)
    s.on_alter_partition_result(error="INVALID_PARTITION_EPOCH")
    assert s.maximal_isr == (1, 2, 3) and s.awaiting_metadata
    assert s.tick(10_000) == []  # no resend while waiting for metadata
    s.on_metadata(isr=(1, 2, 3), partition_epoch=4)
    assert (s.isr, s.pending, s.partition_epoch) == ((1, 2, 3), None, 4)


def test_late_answer_for_an_older_request_is_ignored() -> None:
    log = log_of()
    s = leader(log, isr=(1, 2), partition_epoch=5)
    s.handle_fetch(fetch(3, 0), log, 1)
    s.on_alter_partition_result(isr=(1,), partition_epoch=5)  # answer to an older change
    assert s.pending is not None and s.isr == (1, 2)


def test_unanswered_alter_partition_is_resent_after_the_retry_interval() -> None:
    log = log_of()
    s = leader(log, isr=(1, 2), partition_epoch=2)
    _, first = s.handle_fetch(fetch(3, 0), log, 100)
    assert s.tick(250) == []
    assert s.tick(300) == _expansions(first)


def test_metadata_with_a_newer_partition_epoch_replaces_isr_and_ends_the_pending_change() -> None:
    log = log_of()
    s = leader(log, isr=(1, 2, 3), partition_epoch=2)
    s.on_metadata(isr=(1, 2), partition_epoch=3)  # the controller fenced broker 3
    assert (s.isr, s.partition_epoch) == ((1, 2), 3)
    s.on_metadata(isr=(1, 2, 3), partition_epoch=2)  # an older image: ignored
    assert s.isr == (1, 2)


# ---------------------------------------------------------------- shrink
def test_follower_not_caught_up_for_replica_lag_time_leaves_the_isr() -> None:
    log = log_of()
    s = leader(log, now_ms=0)
    append(log, s, 2)
    s.handle_fetch(fetch(2, 2), log, 100)
    s.handle_fetch(fetch(3, 1), log, 100)
    assert s.tick(1_000) == []
    actions = s.tick(1_001)
    assert actions == [SendAlterPartition(0, 0, (1, 2), {})]
    assert isinstance(s.pending, PendingShrink) and s.pending.removed == (3,)


def test_follower_that_keeps_reaching_the_leo_it_last_saw_stays_in_sync() -> None:
    """Kafka's caught-up rule: reaching the LEO of its previous fetch counts."""
    log = log_of()
    s = leader(log, now_ms=0)
    for t in range(0, 3_000, 200):
        s.handle_fetch(fetch(2, log.log_end_offset), log, t)
        s.handle_fetch(fetch(3, log.log_end_offset), log, t)
        append(log, s, 1)
    assert s.tick(3_000) == []


def test_follower_too_many_records_behind_leaves_the_isr() -> None:
    """Fluvio's record bound (seed 002 "Lagging Follower")."""
    log = log_of()
    s = leader(log, now_ms=0, settings=replace(SETTINGS, replica_lag_max_records=3))
    append(log, s, 5)
    s.handle_fetch(fetch(2, 5), log, 1)
    s.handle_fetch(fetch(3, 1), log, 1)
    assert s.tick(2) == [SendAlterPartition(0, 0, (1, 2), {})]


def test_live_replica_set_holds_replicas_heard_from_recently_in_sync_or_not() -> None:
    log = log_of()
    s = leader(log, isr=(1, 2))
    s.handle_fetch(fetch(3, 0), log, 100)
    assert s.live_replicas(500) == (1, 3)
    assert s.live_replicas(1_101) == (1,)
