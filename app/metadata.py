"""The metadata service seen by the node: the image plus the way commands reach it.

``LocalMetadata`` is the controller of a node that runs without a raft
quorum: it runs the controller state machine in-process and commits records
to the local catalog (``metadata_records``) before applying them, the same
commit-then-apply order a raft-backed controller keeps (seed 001 §6.3).
Commands are serialised with a lock: one change at a time.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from app.catalog import Catalog
from replication.controller import records as R
from replication.controller.image import MetadataImage
from replication.controller.machine import ControllerMachine, CreateTopic, Decision

Listener = Callable[[list[R.Record]], None]


class LocalMetadata:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.image = MetadataImage()
        self._lock = asyncio.Lock()
        self._listeners: list[Listener] = []

    def load(self) -> None:
        """Replay committed records; a fresh catalog gets a new cluster id."""
        for d in self.catalog.load_metadata_records():
            self.image.apply(R.record_from_dict(d))
        if not self.image.cluster_id:
            self._commit([R.ClusterRecord(cluster_id=uuid.uuid4().hex)])

    def add_listener(self, cb: Listener) -> None:
        self._listeners.append(cb)

    def _commit(self, records: list[R.Record]) -> None:
        if not records:
            return
        # Validate by applying to a copy first: a record that cannot apply is never stored.
        trial = self.image.copy()
        for r in records:
            trial.apply(r)
        self.catalog.append_metadata_records(
            self.image.version + 1, [r.to_dict() for r in records]
        )
        self.image = trial
        for cb in self._listeners:
            cb(records)

    async def _run(self, decide: Callable[[ControllerMachine], Decision]) -> Decision:
        async with self._lock:
            decision = decide(ControllerMachine(self.image))
            self._commit(decision.records)
            return decision

    async def register_broker(self, broker_id: int, url: str, zone: str | None, clean: bool) -> int:
        """Returns the new broker epoch."""
        await self._run(lambda m: m.register_broker(broker_id, url, zone, clean))
        return self.image.brokers[broker_id].broker_epoch

    async def create_topic(self, cmd: CreateTopic) -> Decision:
        return await self._run(lambda m: m.create_topic(cmd))

    async def delete_topic(self, name: str) -> Decision:
        return await self._run(lambda m: m.delete_topic(name))
