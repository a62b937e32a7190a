"""Liveness defects of raftos 0.2.6 (FINDINGS 6, 7, 10, 13; repro r03, r05c, r09b).

Same harness and the same patched/unpatched pairing as ``test_raft_safety``.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest
from raft_sim import SimNet, flush

from replication.controller.raft import patches
from replication.controller.raft.codec import SizeBudget
from replication.controller.raft.errors import LeadershipLost
from replication.controller.raft.protocol import RUNTIME

PATCHED = pytest.mark.parametrize("patched", [True, False], ids=["patched", "unpatched"])


def maybe_without(patched: bool, *names: str) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext() if patched else patches.without(*names)


def setcmd(key: str, value: object) -> dict[str, object]:
    return {"op": "set", "u": {key: value}, "rid": None, "txn": "t", "part": 0, "parts": 1}


def heal(net: SimNet, p: int, leader: int | None = None) -> None:
    """End a partition of ``p``: what was sent across it is lost; with ``leader``, a
    heartbeat interval passes so the leader's lost message to ``p`` is due for resending."""
    net.outbox = [m for m in net.outbox if p not in (m[0], m[1])]
    if leader is not None and hasattr(net.st(leader).state, "inflight"):
        net.age_inflight(leader, 2000.0)


@PATCHED
async def test_lagging_follower_gets_one_stream_and_catches_up(tmp_path: Path, patched: bool) -> None:
    """FINDINGS 7 / r05c (B4): every heartbeat started another AppendEntries stream to a
    lagging follower, so it received K copies of each entry with K growing and never
    caught up. With B4 one message is in flight per follower and entries are batched."""
    with maybe_without(patched, "B4"):
        net = SimNet(tmp_path, [1, 2, 3])
        await net.elect(1, {2})
        heal(net, 3)
        await net.settle({1, 2})
        leader = net.st(1).state
        for i in range(200):
            leader.append_command(setcmd(f"k{i % 10}", i))
            await net.settle({1, 2})
        heal(net, 3, leader=1)
        for _ in range(6):  # heartbeats while node 3 has not answered yet
            leader.heartbeat()
            await flush()
        streams = len(net.pending(1, 3, "append_entries"))
        if patched:
            delivered = await net.settle({1, 2, 3})
            caught_up = net.log(3) == net.log(1)
        net.stop()
    if patched:
        assert streams == 1
        assert caught_up
        assert delivered < 60  # batched: ~200 entries in a handful of round trips
    else:
        assert streams >= 6


@PATCHED
async def test_concurrent_writers_each_wait_for_their_own_entry(tmp_path: Path, patched: bool) -> None:
    """FINDINGS 6 / r03: raftos kept one apply future per leader, so with two concurrent
    writers one hung forever and the other could return before its own entry applied."""
    with maybe_without(patched, "W6", "B3", "B4", "HB"):
        net = SimNet(tmp_path, [1, 2, 3])
        await net.elect(1, {2, 3})
        await net.settle({1, 2, 3})
        leader = net.st(1).state
        tasks = [asyncio.ensure_future(leader.execute_command(setcmd(f"w{i}", i))) for i in range(4)]
        for _ in range(5):
            await net.settle({1, 2, 3})
            leader.heartbeat()
            await net.settle({1, 2, 3})
        done = [t for t in tasks if t.done()]
        state = dict(net.st(1).state_machine.view())
        for t in tasks:
            t.cancel()
        net.stop()
    assert all(state.get(f"w{i}") == i for i in range(4))  # the entries did commit
    if patched:
        assert len(done) == 4
    else:
        assert len(done) < 4


@PATCHED
async def test_write_in_flight_fails_when_leader_loses_quorum(tmp_path: Path, patched: bool) -> None:
    """FINDINGS 10 / r09b: a leader that steps down with a write in flight left the caller
    waiting forever. Now the proposal fails as LeadershipLost (outcome unknown)."""
    with maybe_without(patched, "W6", "B3", "B4", "HB"):
        net = SimNet(tmp_path, [1, 2, 3])
        await net.elect(1, {2, 3})
        await net.settle({1, 2, 3})
        leader = net.st(1).state
        write = asyncio.ensure_future(leader.execute_command(setcmd("k", "lost?")))
        await flush()
        net.outbox.clear()  # followers gone
        net.st(1).to_follower()  # what the step-down timer does without acknowledgements
        await flush()
        outcome = write.exception() if write.done() else None
        write.cancel()
        net.stop()
    if patched:
        assert isinstance(outcome, LeadershipLost)
    else:
        assert outcome is None  # still pending: the caller would hang


@PATCHED
async def test_follower_behind_compacted_log_converges_by_snapshot(tmp_path: Path, patched: bool) -> None:
    """FINDINGS 13 (no snapshots) + Raft §7: the leader compacts its log; a follower that
    missed the compacted prefix receives the snapshot in datagram-sized chunks."""
    with maybe_without(patched, "SNAP"):
        net = SimNet(tmp_path, [1, 2, 3], max_log_entries=20)
        RUNTIME.budget = SizeBudget(4_000)  # small datagrams: the snapshot needs chunks
        await net.elect(1, {2})
        heal(net, 3)
        await net.settle({1, 2})
        leader = net.st(1).state
        for i in range(120):
            leader.append_command(setcmd(f"key-{i % 40:03d}", "v" * 100 + str(i)))
            await net.settle({1, 2})
        assert net.st(1).log.base_index >= 90 and len(net.st(1).log.cache) <= 31
        heal(net, 3, leader=1)
        leader.heartbeat()
        chunks = 0
        for _ in range(200):
            await flush()
            chunks += len(net.pending(1, 3, "install_snapshot"))
            if not await net.step({1, 2, 3}):
                break
        leader.append_command(setcmd("after", 1))
        await net.settle({1, 2, 3})
        leader.heartbeat()
        await net.settle({1, 2, 3})
        follower_state = dict(net.st(3).state_machine.view())
        leader_state = dict(net.st(1).state_machine.view())
        net.stop()
    if patched:
        assert chunks > 1
        assert follower_state == leader_state
    else:
        assert follower_state == {}


async def test_restart_resumes_from_snapshot_and_log_tail(tmp_path: Path) -> None:
    """A restarted follower rebuilds its state from snapshot + tail and stays in sync."""
    net = SimNet(tmp_path, [1, 2, 3], max_log_entries=10)
    await net.elect(1, {2, 3})
    await net.settle({1, 2, 3})
    leader = net.st(1).state
    for i in range(35):
        leader.append_command(setcmd(f"k{i % 4}", i))
        await net.settle({1, 2, 3})
    leader.heartbeat()
    await net.settle({1, 2, 3})
    before = dict(net.st(2).state_machine.view())
    net.restart(2)
    snap_index = net.st(2).snapshots.index
    assert snap_index > 0 and net.st(2).log.last_applied == snap_index  # resumes there
    assert len(net.st(2).log.cache) <= 16  # and keeps/replays a bounded tail
    restored = dict(net.st(2).state_machine.view())
    leader.heartbeat()
    await net.settle({1, 2, 3})
    after = dict(net.st(2).state_machine.view())
    net.stop()
    assert set(restored) == set(before)
    assert after == before == {"k0": 32, "k1": 33, "k2": 34, "k3": 31}


async def test_follower_slightly_behind_a_compaction_needs_no_snapshot(tmp_path: Path) -> None:
    """Compaction keeps the newest half of the covered entries, so a follower that missed a
    few entries around a compaction catches up with AppendEntries alone."""
    net = SimNet(tmp_path, [1, 2, 3], max_log_entries=20)
    await net.elect(1, {2, 3})
    await net.settle({1, 2, 3})
    leader = net.st(1).state
    for i in range(15):
        leader.append_command(setcmd(f"k{i % 3}", i))
        await net.settle({1, 2, 3})
    heal(net, 3)
    for i in range(15, 25):  # node 3 misses these; the leader compacts at 20
        leader.append_command(setcmd(f"k{i % 3}", i))
        await net.settle({1, 2})
    assert RUNTIME.snapshots_taken >= 1 and net.st(1).log.base_index > 0
    heal(net, 3, leader=1)
    leader.heartbeat()
    snapshot_chunks = 0
    for _ in range(100):
        await flush()
        snapshot_chunks += len(net.pending(1, 3, "install_snapshot"))
        if not await net.step({1, 2, 3}):
            break
    leader.heartbeat()
    await net.settle({1, 2, 3})
    assert snapshot_chunks == 0
    assert dict(net.st(3).state_machine.view()) == dict(net.st(1).state_machine.view())
    net.stop()
