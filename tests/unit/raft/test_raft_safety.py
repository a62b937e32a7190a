"""Raft safety defects of raftos 0.2.6 (shared/raftos/FINDINGS.md 2-5, 11; repro r07, r09a).

Each scenario runs with the adapter's patches and, as ``unpatched``, with the one patch
that fixes it taken out: the defect must reappear, proving the test exercises the fix.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from raft_sim import SimNet, flush
from raftos import state as rs

from replication.controller.raft import patches
from replication.controller.raft.errors import LeadershipLost

PATCHED = pytest.mark.parametrize("patched", [True, False], ids=["patched", "unpatched"])


def maybe_without(patched: bool, *names: str) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext() if patched else patches.without(*names)


def setcmd(key: str, value: object) -> dict[str, object]:
    return {"op": "set", "u": {key: value}, "rid": None, "txn": "t", "part": 0, "parts": 1}


@PATCHED
async def test_restarted_voter_does_not_vote_twice_in_one_term(tmp_path: Path, patched: bool) -> None:
    """FINDINGS 4 / r07 S1 (V1): votedFor survives a restart, so one term has one leader."""
    with maybe_without(patched, "V1"):
        net = SimNet(tmp_path, [1, 2, 3])
        net.st(1).to_candidate()
        net.st(2).to_candidate()
        await flush()
        await net.pump(1, 3, "request_vote")
        vote_for_1 = net.take(3, 1, "request_vote_response")  # on the wire when 3 crashes
        net.restart(3)
        await net.pump(2, 3, "request_vote")
        net.deliver(vote_for_1)
        await flush()
        for m in net.pending(3, 2, "request_vote_response"):
            net.outbox.remove(m)
            net.deliver(m)
        await flush()
        leaders = [p for p in (1, 2) if net.is_leader(p)]
        terms = {net.st(p).storage.term for p in (1, 2)}
        net.stop()
    assert terms == {1}
    assert leaders == ([1] if patched else [1, 2])


@PATCHED
async def test_delayed_duplicate_append_entries_keeps_committed_entry(tmp_path: Path, patched: bool) -> None:
    """FINDINGS 2 / r07 S2 (B2): a late duplicate AppendEntries must not truncate the log.

    Unpatched, raftos erases from prev_log_index + 1; the adapter's log refuses to erase a
    committed entry (AssertionError) where 0.2.6's log silently lost it.
    """
    with maybe_without(patched, "B2"):
        net = SimNet(tmp_path, [1, 2, 3])
        await net.elect(1, {2})
        assert net.is_leader(1)
        first_ae = net.pending(1, 2, "append_entries")[0]
        stale = (first_ae[0], first_ae[1], dict(first_ae[2]))  # duplicated, delivered late
        net.outbox = [m for m in net.outbox if m[1] != 3]  # node 3 hears nothing
        await net.settle({1, 2})
        leader = net.st(1).state
        client = leader.append_command(setcmd("x", "committed-value"))
        await net.settle({1, 2})
        leader.heartbeat()  # carries the commit index to node 2
        await net.settle({1, 2})
        assert client.done() and client.result() == 2
        erased = None
        try:
            net.deliver(stale)
            await flush()
        except AssertionError as exc:
            erased = exc
        node2_after = net.commands(2)
        net.crash(1)
        net.outbox.clear()
        if erased is None:
            await net.elect(2, {3})
            await net.settle({2, 3})
        new_leader_log = net.commands(2)
        net.stop()
    if patched:
        assert erased is None
        assert node2_after == [setcmd("x", "committed-value")]
        assert new_leader_log == [setcmd("x", "committed-value")]
    else:
        assert erased is not None and "refusing to erase committed entry" in str(erased)


@PATCHED
async def test_four_node_split_vote_elects_nobody(tmp_path: Path, patched: bool) -> None:
    """FINDINGS 5 / r07 S3 (M1): 2 of 4 is not a majority."""
    with maybe_without(patched, "M1"):
        net = SimNet(tmp_path, [1, 2, 3, 4])
        assert net.st(1).is_majority(2) is not patched
        net.st(1).to_candidate()
        net.st(2).to_candidate()
        await flush()
        await net.pump(1, 3, "request_vote")
        await net.pump(2, 4, "request_vote")
        await net.pump(3, 1, "request_vote_response")
        await net.pump(4, 2, "request_vote_response")
        leaders = [p for p in (1, 2) if net.is_leader(p)]
        net.stop()
    assert leaders == ([] if patched else [1, 2])


@PATCHED
async def test_new_leader_commits_older_term_entries_after_full_restart(tmp_path: Path, patched: bool) -> None:
    """FINDINGS 3 / r09a (B1): after a restart the new leader commits its no-op and,
    with it, the previous term's uncommitted tail (Raft §5.4.2)."""
    with maybe_without(patched, "B1"):
        net = SimNet(tmp_path, [1, 2, 3])
        await net.elect(1, {2, 3})
        await net.settle({1, 2, 3})
        net.st(1).state.append_command(setcmd("k", 1))
        await net.settle({1, 2, 3})
        for p in (1, 2, 3):
            net.restart(p)  # commit indexes are volatile: everything is uncommitted now
        await net.elect(2, {1, 3})
        assert net.is_leader(2)
        await net.settle({1, 2, 3})
        commit = net.st(2).log.commit_index
        value = net.st(2).state_machine.view().get("k")
        net.stop()
    if patched:
        assert commit == 3 and value == 1
    else:
        assert commit == 0 and value is None


@PATCHED
async def test_stale_append_entries_reply_does_not_count_towards_commit(tmp_path: Path, patched: bool) -> None:
    """B3 + L2: a reply from an earlier term, or a late duplicate, says nothing about
    the follower's log now; counting it would commit an entry a majority does not hold."""
    with maybe_without(patched, "B3"):
        net = SimNet(tmp_path, [1, 2, 3])
        await net.elect(1, {2, 3})
        await net.settle({1, 2, 3})
        # node 1 leads again in a later term; node 2 and 3 are partitioned from it
        net.st(1).to_follower()
        await net.elect(1, {3})
        await net.settle({1, 3})
        net.crash(3)
        leader = net.st(1).state
        leader.append_command(setcmd("x", 1))
        index = net.st(1).log.last_log_index
        old_term = leader.term - 1
        fake = {
            "type": "append_entries_response",
            "term": old_term,
            "success": True,
            "last_log_index": index,
            "request_id": 0,
        }
        net.deliver((2, 1, fake))
        await flush()
        commit = net.st(1).log.commit_index
        net.stop()
    assert (commit >= index) is not patched


@PATCHED
async def test_duplicated_vote_reply_is_counted_once(tmp_path: Path, patched: bool) -> None:
    """C1: one granted vote delivered twice must not make 2 of 5 look like a majority."""
    with maybe_without(patched, "C1"):
        net = SimNet(tmp_path, [1, 2, 3, 4, 5])
        net.st(1).to_candidate()
        await flush()
        await net.pump(1, 2, "request_vote")
        reply = net.take(2, 1, "request_vote_response")
        net.deliver(reply)
        net.deliver(reply)
        await flush()
        leader = net.is_leader(1)
        net.stop()
    assert leader is not patched


async def test_partitioned_old_leader_read_needs_a_barrier(tmp_path: Path) -> None:
    """FINDINGS 11 / r07 S4: a deposed, partitioned leader still holds stale state; the
    barrier (a no-op that must commit) never completes there and fails once it steps down,
    so the adapter never serves that stale state as current."""
    net = SimNet(tmp_path, [1, 2, 3])
    await net.elect(1, {2, 3})
    await net.settle({1, 2, 3})
    old = net.st(1).state
    old.append_command(setcmd("x", "old"))
    await net.settle({1, 2, 3})
    old.heartbeat()
    await net.settle({1, 2, 3})
    net.outbox = [m for m in net.outbox if 1 not in (m[0], m[1])]  # partition node 1
    await net.elect(2, {3})
    assert net.is_leader(2)
    await net.settle({2, 3})
    net.st(2).state.append_command(setcmd("x", "new"))
    await net.settle({2, 3})
    assert net.st(2).state_machine["x"] == "new"
    assert isinstance(net.st(1).state, rs.Leader)
    assert net.st(1).state_machine["x"] == "old"  # what raftos's get_value would return
    barrier = old.append_command({"op": "noop"})
    await net.settle({2, 3})
    assert not barrier.done()
    net.st(1).to_follower()  # the step-down timer firing without acknowledgements
    await flush()
    with pytest.raises(LeadershipLost):
        barrier.result()
    net.stop()


@PATCHED
async def test_deposed_leader_sends_nothing_in_the_new_term(tmp_path: Path, patched: bool) -> None:
    """L1 (found while porting): raftos's ``validate_term`` demotes a leader and then lets
    already scheduled sends run; raftos's AppendEntries reads ``storage.term`` at send
    time, so the old leader spoke *in the new term* as its leader (two leaders, one term).
    The patched leader pins its term and checks it is still the active role."""
    with maybe_without(patched, "B4"):
        net = SimNet(tmp_path, [1, 2, 3])
        await net.elect(1, {2, 3})
        await net.settle({1, 2, 3})
        net.st(3).to_candidate()  # term 2
        await flush()
        vote_request = net.take(3, 1, "request_vote")
        net.outbox.clear()
        net.st(1).state.append_command(setcmd("x", 1))  # schedules AppendEntries...
        net.deliver(vote_request)  # ...but a term-2 message is handled first
        await flush()
        sent = [m[2]["term"] for m in net.outbox if m[0] == 1 and m[2]["type"] == "append_entries"]
        net.stop()
    assert net.role(1) == "Follower"
    assert (2 in sent) is not patched
