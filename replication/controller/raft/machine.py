"""The replicated key-value state machine (replaces raftos ``StateMachine``).

raftos applies a command with ``dict.update`` into a file it rewrites once per key
(FINDINGS "Medium": O(keys) per apply, no deletes). Here the state lives in memory, is
rebuilt at start from the snapshot plus the committed log tail, and is written out only as
a snapshot (see ``compaction``). Commands are JSON objects:

  {"op": "noop"}                                   leader barrier (Raft §8), changes nothing
  {"op": "set", "u": {key: value|null}, "rid": str|null, "txn": str, "part": i, "parts": n}

``u`` holds absolute values; ``null`` is a tombstone that deletes the key. A change set too
large for one datagram is split into ``parts`` entries sharing ``txn``: it is applied, all
at once, only when its last part applies, so a leader change in the middle drops it whole
instead of applying half. ``rid`` makes a proposal idempotent: a second entry with an
already-applied request id is skipped on every replica alike (deterministic).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

logger = logging.getLogger(__name__)

ApplyListener = Callable[[int, dict[str, Any]], None]

#: How many request ids are remembered for idempotency (oldest forgotten first).
MAX_REQUEST_IDS = 10_000

NOOP: dict[str, Any] = {"op": "noop"}


class KeyValueMachine:
    """Applies committed commands in log order; ``applied_index`` is the last one applied."""

    def __init__(self) -> None:
        self.applied_index = 0
        self.applied_term = 0
        self._state: dict[str, Any] = {}
        self._requests: OrderedDict[str, int] = OrderedDict()
        self._pending: dict[str, Any] | None = None  # parts of a split change set so far
        self.listeners: list[ApplyListener] = []

    # -- reads -------------------------------------------------------------------------------
    def view(self) -> Mapping[str, Any]:
        """Read-only live view of the applied state (tombstoned keys are absent)."""
        return MappingProxyType(self._state)

    def __getitem__(self, key: str) -> Any:
        return self._state[key]

    def request_index(self, request_id: str) -> int | None:
        """Log index at which ``request_id`` was applied, None if unknown (or forgotten)."""
        return self._requests.get(request_id)

    # -- apply ---------------------------------------------------------------------------------
    def apply(self, command: Any, term: int = 0) -> None:
        """Apply the next committed entry (raftos calls this with the command only)."""
        self.applied_index += 1
        self.applied_term = term or self.applied_term
        if not isinstance(command, dict) or command.get("op") != "set":
            return  # no-op barrier, or raftos's own {name: value} commands are not ours
        parts = int(command.get("parts", 1))
        part = int(command.get("part", 0))
        updates: dict[str, Any] = command["u"]
        if parts == 1:
            self._pending = None  # a change set left half-way can never resume after this
        else:
            pending = self._pending
            if part == 0:
                pending = self._pending = {"txn": command["txn"], "next": 0, "u": {}}
            if pending is None or pending["txn"] != command["txn"] or pending["next"] != part:
                self._pending = None  # an abandoned change set: drop it whole
                return
            pending["u"].update(updates)
            pending["next"] = part + 1
            if part + 1 < parts:
                return
            updates = pending["u"]
            self._pending = None
        rid = command.get("rid")
        if rid is not None:
            if rid in self._requests:
                return  # a retried proposal that already applied
            self._requests[rid] = self.applied_index
            while len(self._requests) > MAX_REQUEST_IDS:
                self._requests.popitem(last=False)
        for key, value in updates.items():
            if value is None:
                self._state.pop(key, None)
            else:
                self._state[key] = value
        self._notify(self.applied_index, updates)

    def _notify(self, index: int, updates: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            try:
                listener(index, dict(updates))
            except Exception:  # a listener bug must not stall raft's apply loop
                logger.exception("raft apply listener failed at index %d", index)

    # -- snapshots ---------------------------------------------------------------------------
    def to_snapshot(self) -> dict[str, Any]:
        """Everything needed to resume applying at ``applied_index + 1``."""
        return {
            "index": self.applied_index,
            "term": self.applied_term,
            "state": self._state,
            "requests": list(self._requests.items()),
            "pending": self._pending,
        }

    def load_snapshot(self, snap: Mapping[str, Any], notify: bool = False) -> None:
        """Replace the state with ``snap``; with ``notify``, tell listeners what changed."""
        old = self._state
        self._state = dict(snap["state"])
        self._requests = OrderedDict((str(r), int(i)) for r, i in snap["requests"])
        self._pending = snap.get("pending")
        self.applied_index = int(snap["index"])
        self.applied_term = int(snap["term"])
        if notify:
            diff: dict[str, Any] = {k: None for k in old if k not in self._state}
            diff.update({k: v for k, v in self._state.items() if old.get(k, object()) != v})
            self._notify(self.applied_index, diff)
