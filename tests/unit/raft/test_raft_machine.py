"""The key-value state machine: tombstones, idempotent request ids, snapshots."""

from __future__ import annotations

from typing import Any

from replication.controller.raft.machine import MAX_REQUEST_IDS, KeyValueMachine


def cmd(u: dict[str, Any], rid: str | None = None) -> dict[str, Any]:
    return {"op": "set", "u": u, "rid": rid, "txn": "t", "part": 0, "parts": 1}


def test_absolute_values_and_tombstones() -> None:
    sm = KeyValueMachine()
    sm.apply(cmd({"a": 1, "b": {"x": [1]}}), 1)
    sm.apply({"op": "noop"}, 1)
    sm.apply(cmd({"a": None, "c": 3}), 1)
    assert dict(sm.view()) == {"b": {"x": [1]}, "c": 3}
    assert sm.applied_index == 3


def test_request_id_applies_once_on_every_replica() -> None:
    sm = KeyValueMachine()
    seen: list[int] = []
    sm.listeners.append(lambda i, u: seen.append(i))
    sm.apply(cmd({"a": 1}, "r1"), 1)
    sm.apply(cmd({"a": 2}, "r1"), 1)  # a retry after an unknown outcome
    assert dict(sm.view()) == {"a": 1} and sm.request_index("r1") == 1 and seen == [1]
    for i in range(MAX_REQUEST_IDS + 5):
        sm.apply(cmd({}, f"x{i}"), 1)
    assert sm.request_index("r1") is None  # bounded memory, oldest forgotten first


def test_snapshot_round_trip_reports_the_difference() -> None:
    sm = KeyValueMachine()
    sm.apply(cmd({"a": 1, "b": 2}, "r"), 1)
    snap = sm.to_snapshot()
    other = KeyValueMachine()
    other.apply(cmd({"b": 5, "z": 0}), 1)
    seen: list[tuple[int, dict[str, Any]]] = []
    other.listeners.append(lambda i, u: seen.append((i, u)))
    other.load_snapshot(snap, notify=True)
    assert dict(other.view()) == {"a": 1, "b": 2} and other.request_index("r") == 1
    assert seen == [(1, {"z": None, "a": 1, "b": 2})]


def test_listener_failure_does_not_stop_applying() -> None:
    sm = KeyValueMachine()

    def boom(i: int, u: dict[str, Any]) -> None:
        raise RuntimeError("listener bug")

    sm.listeners.append(boom)
    sm.apply(cmd({"a": 1}), 1)
    assert dict(sm.view()) == {"a": 1}
