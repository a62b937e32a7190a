"""A small harness around the controller state machine: commit = apply + check.

It plays the controller service's part: every decision's records are applied
to the image in order (as if committed through raft), remembered for deltas,
and the image's invariants are checked after each decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from replication.controller import records as R
from replication.controller.deltas import RecentRecords
from replication.controller.image import MetadataImage, PartitionMeta, TopicConfig
from replication.controller.invariants import violations
from replication.controller.machine import (
    AlterPartition,
    ConfirmLeadership,
    ControllerMachine,
    ControllerSettings,
    CreateTopic,
    Decision,
    LeaderSuspect,
)

SETTINGS = ControllerSettings(
    session_timeout_ms=1_000,
    election_timeout_ms=500,
    suspect_window_ms=2_000,
    offline_retry_ms=3_000,
)


@dataclass
class Harness:
    settings: ControllerSettings = SETTINGS
    now_ms: int = 0
    image: MetadataImage = field(default_factory=lambda: MetadataImage(cluster_id="c1"))
    log: list[R.Record] = field(default_factory=list)
    epochs: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.m = ControllerMachine(self.image, self.settings)
        self.recent = RecentRecords(10_000)

    # -- committing ---------------------------------------------------------
    def commit(self, d: Decision) -> Decision:
        """Apply a decision's records like the service would after raft commits them."""
        before = {(p.topic, p.partition): p for p in self.image.all_partitions()}
        for rec in d.records:
            self.image.apply(rec)
            self.recent.append(self.image.version, rec)
            self.log.append(rec)
        assert violations(self.image) == []
        for p in self.image.all_partitions():
            old = before.get((p.topic, p.partition))
            if old is not None:
                assert p.leader_epoch >= old.leader_epoch
                assert p.partition_epoch >= old.partition_epoch
                if p.leader != old.leader:
                    assert p.leader_epoch == old.leader_epoch + 1
        return d

    # -- commands -----------------------------------------------------------
    def register(
        self,
        broker_id: int,
        zone: str | None = None,
        clean: bool = True,
        leos: dict[tuple[str, int], int] | None = None,
    ) -> int:
        d = self.commit(
            self.m.register_broker(
                broker_id, f"http://b{broker_id}", zone, clean, self.now_ms, leos
            )
        )
        self.epochs[broker_id] = d.broker_epoch
        return d.broker_epoch

    def heartbeat(
        self,
        broker_id: int,
        epoch: int | None = None,
        leos: dict[tuple[str, int], int] | None = None,
    ) -> Decision:
        e = self.epochs[broker_id] if epoch is None else epoch
        return self.commit(self.m.heartbeat(broker_id, e, self.now_ms, leos))

    def heartbeat_all(self, *, except_: tuple[int, ...] = ()) -> None:
        for b in sorted(self.epochs):
            if b not in except_:
                self.heartbeat(b)

    def create(self, name: str, partitions: int = 1, rf: int = 3, **config: Any) -> Decision:
        cmd = CreateTopic(name, partitions, rf, TopicConfig(**config))
        return self.commit(self.m.create_topic(cmd))

    def tick(self, advance_ms: int = 0) -> Decision:
        self.now_ms += advance_ms
        return self.commit(self.m.tick(self.now_ms))

    def pass_time(self, ms: int, step_ms: int = 100, *, silent: tuple[int, ...] = ()) -> None:
        """Let time pass in steps; every broker but ``silent`` heartbeats at each step."""
        end = self.now_ms + ms
        while self.now_ms < end:
            self.now_ms = min(self.now_ms + step_ms, end)
            for b in sorted(self.epochs):
                if b not in silent and self.image.brokers[b].broker_epoch == self.epochs[b]:
                    self.heartbeat(b)
            self.commit(self.m.tick(self.now_ms))

    def part(self, topic: str = "t", partition: int = 0) -> PartitionMeta:
        p = self.image.partition(topic, partition)
        assert p is not None
        return p

    def alter(
        self,
        new_isr: tuple[int, ...],
        topic: str = "t",
        partition: int = 0,
        *,
        sender: int | None = None,
        broker_epochs: dict[int, int] | None = None,
        **override: int,
    ) -> Decision:
        p = self.part(topic, partition)
        sender = p.leader if sender is None else sender
        added = {b: self.epochs.get(b, -1) for b in new_isr if b not in p.isr}
        req = AlterPartition(
            broker_id=sender,
            broker_epoch=override.get("broker_epoch", self.epochs.get(sender, -1)),
            topic=topic,
            partition=partition,
            leader_epoch=override.get("leader_epoch", p.leader_epoch),
            partition_epoch=override.get("partition_epoch", p.partition_epoch),
            new_isr=new_isr,
            broker_epochs=added if broker_epochs is None else broker_epochs,
        )
        return self.commit(self.m.alter_partition(req))

    def suspect(
        self, reporter: int, topic: str = "t", partition: int = 0, leo: int = -1, **override: int
    ) -> Decision:
        p = self.part(topic, partition)
        req = LeaderSuspect(
            broker_id=reporter,
            broker_epoch=override.get("broker_epoch", self.epochs[reporter]),
            topic=topic,
            partition=partition,
            leader_epoch=override.get("leader_epoch", p.leader_epoch),
            partition_epoch=override.get("partition_epoch", p.partition_epoch),
            log_end_offset=leo,
        )
        return self.commit(self.m.report_leader_suspect(req, self.now_ms))

    def confirm(self, topic: str = "t", partition: int = 0, **override: int) -> Decision:
        p = self.part(topic, partition)
        broker = override.get("broker", p.leader)
        cmd = ConfirmLeadership(
            broker_id=broker,
            broker_epoch=override.get("broker_epoch", self.epochs.get(broker, -1)),
            topic=topic,
            partition=partition,
            leader_epoch=override.get("leader_epoch", p.leader_epoch),
        )
        return self.commit(self.m.confirm_leadership(cmd))


@pytest.fixture
def cluster() -> Iterator[Callable[..., Harness]]:
    """``cluster(3, zones=...)``: a harness with brokers 1..n registered."""

    def make(n: int = 3, zones: list[str | None] | None = None, **settings: int) -> Harness:
        h = Harness(settings=ControllerSettings(**{**_as_dict(SETTINGS), **settings}))
        for i in range(1, n + 1):
            h.register(i, zone=None if zones is None else zones[i - 1])
        return h

    yield make


def _as_dict(s: ControllerSettings) -> dict[str, int]:
    return {
        "session_timeout_ms": s.session_timeout_ms,
        "election_timeout_ms": s.election_timeout_ms,
        "suspect_window_ms": s.suspect_window_ms,
        "offline_retry_ms": s.offline_retry_ms,
    }
