"""High watermark rules: Maximal ISR, min ISR, monotonicity, LESO and the applied HW.

Seed 001 §6.4 (HWM monotonicity, worked example §6.4.1) and §6.5.2 (the
Maximal ISR, with its worked counter-example).
"""

from __future__ import annotations

from core_support import append, fetch, follower, leader, log_of, replicate

from replication.core.actions import HighWatermarkAdvanced, SendAlterPartition
from replication.core.leader import LeaderState
from replication.core.log import MemoryLog
from replication.core.rules import SafetyRules


def test_hw_is_the_minimum_fetch_offset_over_the_isr() -> None:
    log = log_of()
    s = leader(log)
    append(log, s, 5)
    assert s.high_watermark == 0
    s.handle_fetch(fetch(2, 5), log, 1)
    assert s.high_watermark == 0  # replica 3 has not fetched
    resp, actions = s.handle_fetch(fetch(3, 3), log, 2)
    assert s.high_watermark == 3
    assert actions == [HighWatermarkAdvanced(3)]
    assert resp.hw == 3


def test_hw_does_not_advance_while_the_isr_is_below_min_isr() -> None:
    log = log_of()
    s = leader(log, isr=(1,), min_isr=2)
    append(log, s, 4)
    assert s.high_watermark == 0
    assert not s.can_commit()


def test_hw_never_moves_backwards_when_a_follower_refetches_lower() -> None:
    log = log_of()
    s = leader(log, isr=(1, 2), min_isr=1)
    append(log, s, 4)
    s.handle_fetch(fetch(2, 4), log, 1)
    assert s.high_watermark == 4
    s.handle_fetch(fetch(2, 2), log, 2)  # a late duplicate of an older fetch
    assert s.high_watermark == 4


def test_single_replica_leader_commits_on_append() -> None:
    log = log_of()
    s = LeaderState(
        local_broker=1,
        leader_epoch=0,
        isr=(1,),
        min_insync_replicas=1,
        high_watermark=0,
        log_end_offset=0,
        leader_epoch_start_offset=0,
    )
    log.append(0, 1)
    assert s.on_local_append(1) is True
    assert s.high_watermark == 1
    assert s.applied_high_watermark == 1
    assert s._advance_hw() is False  # the app module calls this after construction


def test_hw_advances_over_the_maximal_isr_while_an_expansion_is_pending() -> None:
    """§6.5.2 "Expanding the ISR": leader ISR [1,2], proposed [1,2,3]."""
    log = log_of()
    s = leader(log, isr=(1, 2), min_isr=2)
    s.handle_fetch(fetch(3, 0), log, 1)  # 3 reached HW 0 and LESO 0 in this epoch
    assert s.proposed_isr == (1, 2, 3)
    assert s.maximal_isr == (1, 2, 3)
    append(log, s, 10)
    s.handle_fetch(fetch(2, 10), log, 2)
    assert s.high_watermark == 0  # 3 is in the Maximal ISR and has nothing yet
    s.handle_fetch(fetch(3, 10), log, 3)
    assert s.high_watermark == 10


def test_without_the_maximal_isr_the_leader_commits_what_the_new_isr_member_lacks() -> None:
    """§6.5.2's counter-example, steps 1-6: with the rule switched off the HW
    reaches 10 although r3, about to be in the controller's ISR, has nothing."""
    log = log_of()
    s = leader(log, isr=(1, 2), min_isr=2, rules=SafetyRules(hw_over_maximal_isr=False))
    s.handle_fetch(fetch(2, 0), log, 1)
    _, actions = s.handle_fetch(fetch(3, 0), log, 1)
    assert any(isinstance(a, SendAlterPartition) for a in actions)
    append(log, s, 10)
    s.handle_fetch(fetch(2, 10), log, 2)
    assert s.high_watermark == 10  # unsafe: r3 has an empty log


def test_hw_keeps_the_removed_replica_while_a_shrink_is_pending() -> None:
    """§6.5.2 "Shrinking the ISR": Maximal ISR stays [1,2,3] until the controller agrees."""
    log = log_of()
    s = leader(log, now_ms=0)
    s.handle_fetch(fetch(2, 0), log, 0)
    s.handle_fetch(fetch(3, 0), log, 0)
    append(log, s, 3)
    s.handle_fetch(fetch(2, 3), log, 500)
    actions = s.tick(2_000)  # 3 has not caught up for > replica_lag_time_ms
    assert actions == [SendAlterPartition(0, 0, (1, 2), {})]
    assert s.maximal_isr == (1, 2, 3)
    s.handle_fetch(fetch(2, 3), log, 2_001)
    assert s.high_watermark == 0
    s.on_alter_partition_result(isr=(1, 2), partition_epoch=1)
    assert s.high_watermark == 3


def test_new_leader_with_a_stale_local_hw_reports_hw_unknown_until_it_reaches_leso() -> None:
    """§6.4.1 worked example, then §6.4.2: r2 is elected with HW 0 < true HW 1."""
    logs = {r: MemoryLog() for r in (1, 2, 3)}
    r1 = leader(logs[1])  # step 1: ISR [r1, r2, r3], all empty
    append(logs[1], r1, 1)  # step 2: one record, r1 LEO=1 HW=0
    f2, f3 = follower(logs[2]), follower(logs[3], me=3)
    for f, r in ((f2, 2), (f3, 3)):  # step 3: fetchOffset=0, the record is shipped
        req = f.build_fetch(logs[r])
        assert req is not None
        resp, _ = r1.handle_fetch(req, logs[1], 1)
        f.on_fetch_response(req, resp, logs[r], 1)
        replicate(logs[1], logs[r])
        f.on_log_changed(logs[r])
    assert r1.high_watermark == 0
    for r in (2, 3):  # step 4: fetchOffset=1, leader HW=1 (the True HW)
        r1.handle_fetch(fetch(r, 1), logs[1], 2)
    assert r1.high_watermark == 1
    assert (f2.high_watermark, f3.high_watermark) == (0, 0)
    assert r1.applied_high_watermark == 1  # step 5: a consumer reads offset 0
    # step 6: r1 fenced, r2 elected at epoch 1 with ISR [r2, r3] and a stale HW 0.
    r2 = LeaderState.become_leader(
        local_broker=2,
        leader_epoch=1,
        partition_epoch=1,
        isr=(2, 3),
        assignment=(1, 2, 3),
        min_insync_replicas=2,
        log=logs[2],
        high_watermark=f2.high_watermark,
        now_ms=3,
    )
    assert r2.high_watermark == 0 and r2.leader_epoch_start_offset == 1
    assert r2.applied_high_watermark is None  # "HW unknown", never 0 after 1
    r2.handle_fetch(fetch(3, 1, epoch=1), logs[2], 4)
    assert r2.high_watermark == 1
    assert r2.applied_high_watermark == 1


def test_applied_hw_rule_switched_off_shows_the_stale_hw() -> None:
    log = log_of(0)
    s = leader(log, epoch=1, hw=0, rules=SafetyRules(applied_hw_rule=False))
    assert s.applied_high_watermark == 0


def test_becoming_leader_records_leso_as_the_log_end_offset_and_caps_hw() -> None:
    log = log_of(0, 0, 1)
    s = leader(log, epoch=2, hw=99)
    assert s.leader_epoch_start_offset == 3
    assert s.high_watermark == 3


def test_pending_expansion_below_min_isr_does_not_advance_hw() -> None:
    """§6.5.2, the ELR example: ISR [1], Maximal ISR [1, 3], min ISR 2. The
    Maximal ISR is not a superset of the election quorum here, so the HW must
    not move on it: |ISR| < min ISR blocks advancement."""
    log = log_of()
    s = leader(log, isr=(1,), min_isr=2)
    s.handle_fetch(fetch(3, 0), log, 1)
    assert s.maximal_isr == (1, 3)
    append(log, s, 4)
    s.handle_fetch(fetch(3, 4), log, 2)
    assert s.high_watermark == 0
    s.on_alter_partition_result(isr=(1, 3), partition_epoch=1)
    assert s.high_watermark == 4
