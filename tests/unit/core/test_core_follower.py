"""The follower: fetch requests, HW adoption, truncation by leader epoch, leader suspicion."""

from __future__ import annotations

from core_support import fetch, follower, leader, log_of, replicate

from replication.core import messages as M
from replication.core.actions import AppendFetched, ReportLeaderSuspect, Truncate
from replication.core.follower import NO_LEADER, FollowerState
from replication.core.log import MemoryLog
from replication.core.rules import SafetyRules


def _ok(req: M.FetchRequest, hw: int, epoch: int = 0, records: bool = True) -> M.FetchResponse:
    return M.FetchResponse(req.fetch_offset, hw, epoch, 0, records_available=records)


def _sync(leader_log: MemoryLog, log: MemoryLog, f: FollowerState, epoch: int = 0) -> None:
    """One fetch round against a leader log at ``epoch``."""
    s = leader(leader_log, epoch=epoch)
    req = f.build_fetch(log)
    assert req is not None
    resp, _ = s.handle_fetch(req, leader_log, 1)
    for a in f.on_fetch_response(req, resp, log, 1):
        if isinstance(a, Truncate):
            log.truncate_to(a.offset)
        elif isinstance(a, AppendFetched):
            replicate(leader_log, log)
        f.on_log_changed(log)


def test_fetch_request_carries_leo_last_epoch_leader_epoch_and_broker_epoch() -> None:
    log = log_of(0, 1, 1)
    f = follower(log, epoch=3, broker_epoch=11)
    assert f.build_fetch(log) == M.FetchRequest(3, 1, 3, 11, 2)


def test_follower_without_a_leader_does_not_fetch() -> None:
    log = log_of()
    f = follower(log, leader_id=NO_LEADER)
    assert f.build_fetch(log) is None
    assert f.tick(log, 10_000) == []


def test_follower_adopts_the_leader_hw_capped_at_its_own_leo() -> None:
    log = log_of(0, 0)
    f = follower(log)
    req = f.build_fetch(log)
    assert req is not None
    assert f.on_fetch_response(req, _ok(req, hw=5), log, 1) == [AppendFetched(2)]
    assert f.high_watermark == 2
    log.append(0, 2)
    f.on_log_changed(log)
    assert f.high_watermark == 3


def test_follower_hw_may_go_down_when_a_new_leader_has_a_lower_hw() -> None:
    """§6.4: the local HW of a follower is not monotonic."""
    log = log_of(0, 0, 0)
    f = follower(log, hw=3, epoch=1)
    req = f.build_fetch(log)
    assert req is not None
    f.on_fetch_response(req, _ok(req, hw=1, epoch=1, records=False), log, 1)
    assert f.high_watermark == 1


def test_late_or_duplicated_response_to_an_older_request_is_ignored() -> None:
    log = log_of(0, 0)
    f = follower(log)
    old = fetch(2, 1, broker_epoch=7)
    stale = M.FetchResponse(1, 1, 0, 0, diverging_epoch=M.DivergingEpoch(0, 1))
    assert f.on_fetch_response(old, stale, log, 1) == []
    assert log.log_end_offset == 2


def test_response_for_another_leader_epoch_is_ignored() -> None:
    log = log_of(0)
    f = follower(log, epoch=2)
    req = f.build_fetch(log)
    assert req is not None
    assert f.on_fetch_response(req, _ok(req, hw=1, epoch=1), log, 1) == []


def test_diverging_follower_truncates_to_the_leaders_end_of_the_shared_epoch() -> None:
    """KIP-101: the deposed leader's uncommitted epoch-0 tail goes; not to its HW."""
    leader_log = log_of(0, 0, 2, 2)
    log = log_of(0, 0, 0, 0, 0)
    f = follower(log, epoch=2, hw=1)
    req = f.build_fetch(log)
    assert req is not None
    resp = M.FetchResponse(5, 2, 2, 0, diverging_epoch=M.DivergingEpoch(0, 2))
    assert f.on_fetch_response(req, resp, log, 1) == [Truncate(2)]
    log.truncate_to(2)
    f.on_log_changed(log)
    _sync(leader_log, log, f, epoch=2)
    assert log.records == leader_log.records


def test_follower_with_an_epoch_unknown_to_the_leader_converges_in_two_rounds() -> None:
    """Follower has epochs 0 and 1; the leader has 0 (to offset 2) then 2."""
    leader_log = log_of(0, 0, 2, 2)
    log = log_of(0, 1, 1)
    f = follower(log, epoch=2)
    _sync(leader_log, log, f, epoch=2)  # leader answers (0, 2); ours: 0 ends at 1
    assert log.records == leader_log.records[:1]
    _sync(leader_log, log, f, epoch=2)
    assert log.records == leader_log.records


def test_truncation_never_goes_below_where_the_logs_agree_even_with_a_stale_hw() -> None:
    """The pre-KIP-101 bug: truncating to a stale local HW loses committed records."""
    log = log_of(0, 0, 0)
    f = follower(log, epoch=1, hw=0)
    assert log.log_end_offset == 3  # becoming a follower truncates nothing
    req = f.build_fetch(log)
    assert req is not None
    resp = M.FetchResponse(3, 3, 1, 0)
    assert f.on_fetch_response(req, resp, log, 1) == []
    assert f.high_watermark == 3


def test_truncate_to_hw_switched_off_truncates_on_becoming_follower() -> None:
    log = log_of(0, 0, 0)
    _, actions = FollowerState.become_follower(
        local_broker=2,
        leader=1,
        leader_epoch=1,
        partition_epoch=0,
        broker_epoch=7,
        log=log,
        high_watermark=1,
        now_ms=0,
        rules=SafetyRules(truncate_by_leader_epoch=False),
    )
    assert actions == [Truncate(1)]


def test_errors_do_not_count_as_a_successful_fetch() -> None:
    log = log_of()
    f = follower(log, now_ms=0)
    req = f.build_fetch(log)
    assert req is not None
    err = M.FetchResponse(0, -1, -1, 0, error=M.NOT_LEADER)
    assert f.on_fetch_response(req, err, log, 400) == []
    assert f.last_fetch_ok_ms == 0


def test_follower_reports_its_leader_after_leader_timeout_and_repeats_at_that_interval() -> None:
    log = log_of(0)
    f = follower(log, epoch=4, now_ms=0)
    assert f.tick(log, 499) == []
    assert f.tick(log, 500) == [ReportLeaderSuspect(1, 4, 0, 1)]
    assert f.tick(log, 700) == []
    assert f.tick(log, 1_000) == [ReportLeaderSuspect(1, 4, 0, 1)]


def test_a_successful_fetch_resets_leader_suspicion() -> None:
    log = log_of()
    f = follower(log, now_ms=0)
    req = f.build_fetch(log)
    assert req is not None
    f.on_fetch_response(req, _ok(req, 0, records=False), log, 450)
    assert f.tick(log, 600) == []
