"""RaftMetadataLog in-process with a single voter (the default dev setup)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from replication.controller.raft import (
    CommandTooLarge,
    NotLeaderError,
    RaftMetadataLog,
    RaftSettings,
    patches,
)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def single(tmp_path: Path, **kw: Any) -> RaftSettings:
    addr = ("127.0.0.1", free_udp_port())
    return RaftSettings(node_id=7, raft_addr=addr, voters={7: addr}, data_dir=tmp_path, secret="dev", **kw)


async def test_single_voter_commits_immediately_with_no_extra_configuration(
    tmp_path: Path,
) -> None:
    log = RaftMetadataLog(single(tmp_path))
    leaders: list[tuple[int | None, bool]] = []
    applied: list[tuple[int, dict[str, Any]]] = []
    log.add_leader_listener(lambda lid, me: leaders.append((lid, me)))
    log.add_apply_listener(lambda i, u: applied.append((i, u)))
    await log.start()
    try:
        assert log.is_leader and log.leader_id == 7
        i1 = await log.propose({"a": 1, "b": [1, 2]}, request_id="r1")
        i2 = await log.propose({"a": None, "c": "x"})
        assert await log.propose({"a": 99}, request_id="r1") == i1  # idempotent retry
        await log.barrier()
        assert dict(log.state()) == {"b": [1, 2], "c": "x"}
        assert applied == [(i1, {"a": 1, "b": [1, 2]}), (i2, {"a": None, "c": "x"})]
        assert log.request_applied_index("r1") == i1
        assert leaders and leaders[-1] == (7, True)
    finally:
        await log.stop()


async def test_concurrent_proposals_all_complete_in_order(tmp_path: Path) -> None:
    log = RaftMetadataLog(single(tmp_path))
    await log.start()
    try:
        indexes = await asyncio.gather(*(log.propose({f"k{i}": i}) for i in range(30)))
        assert len(set(indexes)) == 30
        assert dict(log.state()) == {f"k{i}": i for i in range(30)}
    finally:
        await log.stop()


async def test_oversize_value_is_refused_and_large_change_set_is_split(tmp_path: Path) -> None:
    log = RaftMetadataLog(single(tmp_path))
    await log.start()
    try:
        with pytest.raises(CommandTooLarge):
            await log.propose({"big": "x" * 70_000})
        before = log.applied_index
        big = {f"p{i}": "y" * 1_000 for i in range(200)}
        index = await log.propose(big)
        assert index - before >= 3  # several entries, one change set
        assert all(log.state()[k] == v for k, v in big.items())
    finally:
        await log.stop()


@pytest.mark.parametrize("max_log_entries", [20, None], ids=["compacting", "unbounded"])
async def test_log_is_bounded_and_state_survives_restart(tmp_path: Path, max_log_entries: int | None) -> None:
    """FINDINGS 13: without compaction the log (and restart replay) grows with history."""
    settings = single(tmp_path, max_log_entries=max_log_entries)
    log = RaftMetadataLog(settings)
    await log.start()
    for i in range(150):
        await log.propose({f"k{i % 5}": i, "gone": None if i % 2 else i})
    expected = dict(log.state())
    await log.stop()
    log = RaftMetadataLog(settings)
    await log.start()
    try:
        assert dict(log.state()) == expected
        entries = log.status()["log_entries"]
        if max_log_entries is None:
            assert entries >= 150
        else:
            assert entries <= max_log_entries * 3 // 2 + 2
        await log.propose({"after": 1})
    finally:
        await log.stop()


async def test_one_raft_node_per_process(tmp_path: Path) -> None:
    first = RaftMetadataLog(single(tmp_path / "a"))
    await first.start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            await RaftMetadataLog(single(tmp_path / "b")).start()
    finally:
        await first.stop()


async def test_non_voter_is_refused_and_minority_node_is_not_leader(tmp_path: Path) -> None:
    addr = ("127.0.0.1", free_udp_port())
    other = ("127.0.0.1", free_udp_port())
    with pytest.raises(ValueError, match="voter"):
        RaftMetadataLog(RaftSettings(1, addr, {2: other}, tmp_path, "s"))
    log = RaftMetadataLog(RaftSettings(1, addr, {1: addr, 2: other}, tmp_path, "s"))
    await log.start()
    try:
        assert not log.is_leader and log.leader_id is None
        with pytest.raises(NotLeaderError) as info:
            await log.propose({"a": 1})
        assert info.value.leader_id is None
        with pytest.raises(NotLeaderError):
            await log.barrier()
    finally:
        await log.stop()


@pytest.mark.parametrize("patched", [True, False], ids=["patched", "unpatched"])
async def test_single_voter_keeps_leading_without_followers(tmp_path: Path, patched: bool) -> None:
    """HB: raftos's leader steps down when no majority of *replies* arrives; a single
    voter gets none, so it flapped between leader and follower."""
    ctx = contextlib.nullcontext() if patched else patches.without("HB")
    with ctx:
        log = RaftMetadataLog(single(tmp_path, heartbeat_interval_s=0.05))  # step-down 0.25 s
        await log.start()
        try:
            loop = asyncio.get_running_loop()
            end = loop.time() + 1.0
            lost = False
            while loop.time() < end and not lost:
                lost = not log.is_leader
                await asyncio.sleep(0.02)
        finally:
            await log.stop()
    assert lost is not patched


async def test_datagrams_under_another_key_are_dropped(tmp_path: Path) -> None:
    """FINDINGS 8 on the wire: a datagram sealed with raftos's published sample key (or
    any other key) is dropped, not applied and not raised into the event loop."""
    from raftos.conf import Configuration

    log = RaftMetadataLog(single(tmp_path))
    await log.start()
    try:
        sample = Configuration().cryptor  # raftos's default: the sample secret key
        forged = {
            "type": "append_entries",
            "term": 99,
            "leader_id": "127.0.0.1:1",
            "commit_index": 0,
            "request_id": 0,
            "prev_log_index": 0,
            "prev_log_term": 0,
            "entries": [],
        }
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(sample.encrypt(json.dumps(forged).encode()), log.settings.raft_addr)
            s.sendto(b"not even a token", log.settings.raft_addr)
        loop = asyncio.get_running_loop()
        end = loop.time() + 5
        while log.status()["dropped_datagrams"] < 2 and loop.time() < end:
            await asyncio.sleep(0.01)
        assert log.status()["dropped_datagrams"] == 2
        assert log.is_leader and log.term == 1
    finally:
        await log.stop()
