"""Datagram size limits (FINDINGS 9, repro r06): every message fits after encryption."""

from __future__ import annotations

from typing import Any

import pytest

from replication.controller.raft.codec import (
    JsonWireSerializer,
    SecretCryptor,
    SizeBudget,
    fernet_size,
)
from replication.controller.raft.machine import KeyValueMachine

UDP_MAX = 65_507
CRYPTOR = SecretCryptor("codec test secret")


def append_entries(entries: list[dict[str, Any]]) -> bytes:
    big = 10**15
    message = {
        "type": "append_entries",
        "term": big,
        "leader_id": "255.255.255.255:65535",
        "commit_index": big,
        "request_id": big,
        "prev_log_index": big,
        "prev_log_term": big,
        "entries": entries,
    }
    return CRYPTOR.encrypt(JsonWireSerializer.pack(message))


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000, 49_000])
def test_fernet_size_is_exact(n: int) -> None:
    assert fernet_size(n) == len(CRYPTOR.encrypt(b"x" * n))


def test_raftos_sends_oversize_datagrams_for_a_50kb_value() -> None:
    """The r06 defect: one 50 KB value makes an AppendEntries over the UDP limit."""
    entry = {"term": 1, "command": {"big": "x" * 50_000}}
    assert len(append_entries([entry])) > UDP_MAX


def test_large_change_set_is_split_into_entries_that_fit() -> None:
    budget = SizeBudget(60_000)
    updates = {f"key-{i:05d}": "ü" * 900 for i in range(300)}  # ~540 KB of UTF-8
    commands = budget.split_updates(updates, "rid-1", "txn-1")
    assert commands is not None and len(commands) > 5
    for cmd in commands:
        datagram = append_entries([{"term": 10**15, "command": cmd}])
        assert len(datagram) <= 60_000
    merged: dict[str, Any] = {}
    for cmd in commands:
        merged.update(cmd["u"])
    assert merged == updates and list(merged) == list(updates)
    assert {c["parts"] for c in commands} == {len(commands)}


def test_one_value_over_the_cap_is_refused() -> None:
    budget = SizeBudget(60_000)
    assert budget.split_updates({"big": "x" * 50_000}, None, "t") is None
    assert budget.split_updates({"fits": "x" * 40_000}, None, "t") is not None


def test_leader_batches_entries_only_while_they_fit() -> None:
    budget = SizeBudget(60_000)
    entries = [{"term": 1, "command": {"op": "set", "u": {"k": "v" * 10_000}}} for _ in range(20)]
    n = budget.pack_entries(entries)
    assert 1 <= n < 20
    assert len(append_entries(entries[:n])) <= 60_000
    assert len(append_entries(entries[: n + 1])) > 60_000


def test_split_change_set_applies_atomically_with_its_last_part() -> None:
    budget = SizeBudget(4_000)
    updates = {f"k{i}": "v" * 500 for i in range(20)}
    parts = budget.split_updates(updates, "r", "t1")
    assert parts is not None and len(parts) > 2
    sm = KeyValueMachine()
    seen: list[tuple[int, dict[str, Any]]] = []
    sm.listeners.append(lambda i, u: seen.append((i, u)))
    for cmd in parts[:-1]:
        sm.apply(cmd, 1)
    assert dict(sm.view()) == {} and seen == []
    sm.apply(parts[-1], 1)
    assert dict(sm.view()) == updates and seen == [(len(parts), updates)]
    # a change set abandoned half-way (leader change) is dropped whole
    other = budget.split_updates(updates, None, "t2")
    assert other is not None
    sm.apply(other[0], 2)
    sm.apply({"op": "set", "u": {"x": 1}, "rid": None, "txn": "t3", "part": 0, "parts": 1}, 2)
    sm.apply(other[1], 2)
    assert dict(sm.view()) == {**updates, "x": 1}
