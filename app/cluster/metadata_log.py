"""The metadata log seam: a replicated key-value log the controller commits to.

Two implementations with one shape: :class:`LocalMetadataLog` (a standalone
node is its own single voter; values are kept in the local catalog) and the
raftos adapter (``replication.controller.raft``), wrapped by
:class:`RaftLog`. The controller service only sees this protocol, so the
consensus engine stays replaceable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from app.catalog import Catalog

LeaderListener = Callable[[int | None, bool], None]


class NotLeaderError(Exception):
    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the metadata leader (leader: {leader_id})")
        self.leader_id = leader_id


class MetadataLog(Protocol):
    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_id(self) -> int | None: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def propose(self, updates: dict[str, Any | None], request_id: str | None = None) -> int:
        """Commit key updates (None = delete); returns once applied locally."""
        ...

    async def barrier(self) -> None:
        """Commit a no-op in the current term so every earlier entry is applied here."""
        ...

    def state(self) -> Mapping[str, Any]: ...

    def add_leader_listener(self, cb: LeaderListener) -> None: ...


class LocalMetadataLog:
    """Single-voter log in the local catalog: always leader, commits are one transaction."""

    def __init__(self, catalog: Catalog, node_id: int) -> None:
        self.catalog = catalog
        self.node_id = node_id
        self._state: dict[str, Any] = {}
        self._listeners: list[LeaderListener] = []
        self._index = 0

    @property
    def is_leader(self) -> bool:
        return True

    @property
    def leader_id(self) -> int | None:
        return self.node_id

    async def start(self) -> None:
        self._state = self.catalog.load_metadata_kv()
        for cb in self._listeners:
            cb(self.node_id, True)

    async def stop(self) -> None:
        return None

    async def propose(self, updates: dict[str, Any | None], request_id: str | None = None) -> int:
        self.catalog.write_metadata_kv(updates)
        for k, v in updates.items():
            if v is None:
                self._state.pop(k, None)
            else:
                self._state[k] = v
        self._index += 1
        return self._index

    async def barrier(self) -> None:
        return None

    def state(self) -> Mapping[str, Any]:
        return self._state

    def add_leader_listener(self, cb: LeaderListener) -> None:
        self._listeners.append(cb)
