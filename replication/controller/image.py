"""The metadata image: brokers, topics and partition state, rebuilt from records.

The image is mutated only by :meth:`MetadataImage.apply`, which is
deterministic, so replaying the same committed records gives the same image on
every node. ``version`` counts applied records: a broker that has applied
version V needs exactly the records after V.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from replication.controller import records as R

NO_LEADER = -1
"""``PartitionMeta.leader`` when the partition has no leader (offline)."""

ONLINE = "online"
"""The leader is confirmed (or was assigned at creation) and serves."""
OFFLINE = "offline"
"""No eligible candidate: ``leader`` is ``NO_LEADER`` until one returns (seed 002)."""
ELECTION = "election"
"""A candidate was chosen and has not yet confirmed leadership (seed 002 wait-for-response)."""
STATUSES = (ONLINE, OFFLINE, ELECTION)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """Per-topic settings (API.md ``config``); unknown keys are refused by the API."""

    min_insync_replicas: int = 1
    retention_ms: int | None = None
    retention_bytes: int | None = None
    segment_bytes: int = 134_217_728
    segment_ms: int = 604_800_000
    cleanup_policy: str = "delete"
    unclean_leader_election: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TopicConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass(slots=True)
class BrokerMeta:
    """A registered broker. ``broker_epoch`` is new at every registration."""

    broker_id: int
    url: str
    zone: str | None
    broker_epoch: int
    fenced: bool = False
    clean: bool = True
    """False when it registered after an unclean shutdown and has not caught up."""


@dataclass(slots=True)
class PartitionMeta:
    """Controller-side partition state (seed 001 §6.3: the controller's copy is the truth).

    ``leader`` is ``NO_LEADER`` (-1) exactly when ``status`` is ``offline``.
    ``isr`` is a subset of ``replicas``; it contains ``leader`` when there is
    one. It may hold fenced brokers only while the partition is offline: they
    are the last replicas known to host the complete committed log, and the
    only candidates of a clean election when one comes back. ``leader_epoch``
    grows with every leader change (including to ``NO_LEADER``),
    ``partition_epoch`` with every committed change of this partition.
    """

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    status: str = "online"  # online | offline | election
    last_election_unclean: bool = False
    elr: tuple[int, ...] = ()
    """Eligible leader replicas (KIP-966's ELR): members the controller removed from an
    ISR that was left below ``min_insync_replicas``. The HW cannot advance without
    min ISR members, so they still hold the whole committed log; disjoint from ``isr``.
    Used for recovery when every last-known complete replica crashed (seed 001 §6.8)."""


@dataclass(slots=True)
class TopicMeta:
    """A topic; ``partitions[p].partition == p``."""

    name: str
    topic_id: str
    replication_factor: int
    config: TopicConfig
    partitions: list[PartitionMeta] = field(default_factory=list)


@dataclass(slots=True)
class MetadataImage:
    """Everything the controller knows; ``version`` = number of records applied."""

    cluster_id: str = ""
    version: int = 0
    brokers: dict[int, BrokerMeta] = field(default_factory=dict)
    topics: dict[str, TopicMeta] = field(default_factory=dict)
    last_broker_epoch: int = 0
    entities: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Configuration entities by kind, then name (``EntityRecord``)."""

    def copy(self) -> MetadataImage:
        return copy.deepcopy(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready snapshot; ``MetadataImage.from_dict`` inverts it exactly.

        A broker too far behind the recent-record window loads this instead of
        deltas, then continues with records after ``version``.
        """
        return {
            "cluster_id": self.cluster_id,
            "version": self.version,
            "last_broker_epoch": self.last_broker_epoch,
            "brokers": [asdict(b) for b in sorted(self.brokers.values(), key=_broker_key)],
            "topics": [
                {
                    "name": t.name,
                    "topic_id": t.topic_id,
                    "replication_factor": t.replication_factor,
                    "config": t.config.to_dict(),
                    "partitions": [_partition_to_dict(p) for p in t.partitions],
                }
                for t in sorted(self.topics.values(), key=lambda t: t.name)
            ],
            "entities": {k: dict(sorted(v.items())) for k, v in sorted(self.entities.items())},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MetadataImage:
        """Inverse of ``to_dict``; raises ``KeyError``/``TypeError`` on a malformed snapshot."""
        image = cls(
            cluster_id=d["cluster_id"],
            version=d["version"],
            last_broker_epoch=d["last_broker_epoch"],
        )
        for b in d["brokers"]:
            image.brokers[b["broker_id"]] = BrokerMeta(**b)
        for kind, named in (d.get("entities") or {}).items():
            image.entities[kind] = {name: dict(v) for name, v in named.items()}
        for t in d["topics"]:
            image.topics[t["name"]] = TopicMeta(
                name=t["name"],
                topic_id=t["topic_id"],
                replication_factor=t["replication_factor"],
                config=TopicConfig.from_dict(t["config"]),
                partitions=[
                    PartitionMeta(
                        topic=t["name"],
                        partition=p["partition"],
                        replicas=tuple(p["replicas"]),
                        isr=tuple(p["isr"]),
                        leader=p["leader"],
                        leader_epoch=p["leader_epoch"],
                        partition_epoch=p["partition_epoch"],
                        status=p["status"],
                        last_election_unclean=p["last_election_unclean"],
                        elr=tuple(p.get("elr", ())),
                    )
                    for p in t["partitions"]
                ],
            )
        return image

    def all_partitions(self) -> list[PartitionMeta]:
        """Every partition, in topic-name then partition order (deterministic)."""
        return [p for name in sorted(self.topics) for p in self.topics[name].partitions]

    def entity(self, kind: str, name: str) -> dict[str, Any] | None:
        """The value of one configuration entity; ``None`` when it does not exist."""
        return self.entities.get(kind, {}).get(name)

    def entities_of(self, kind: str) -> dict[str, dict[str, Any]]:
        """Every entity of ``kind`` by name (empty when none); do not mutate."""
        return self.entities.get(kind, {})

    def live_broker(self, broker_id: int) -> bool:
        """True when the broker is registered and not fenced."""
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return None
        return t.partitions[partition]

    def apply(self, record: R.Record) -> None:
        """Apply one committed record; raises ``ValueError`` on a record that cannot apply."""
        match record:
            case R.ClusterRecord():
                self.cluster_id = record.cluster_id
            case R.RegisterBrokerRecord():
                self.brokers[record.broker_id] = BrokerMeta(
                    broker_id=record.broker_id,
                    url=record.url,
                    zone=record.zone,
                    broker_epoch=record.broker_epoch,
                    fenced=False,
                    clean=record.clean,
                )
                self.last_broker_epoch = max(self.last_broker_epoch, record.broker_epoch)
            case R.FenceBrokerRecord() | R.UnfenceBrokerRecord():
                b = self.brokers.get(record.broker_id)
                # A record for an epoch the broker no longer holds changes nothing;
                # it still counts as a committed record (version below).
                if b is not None and b.broker_epoch == record.broker_epoch:
                    b.fenced = isinstance(record, R.FenceBrokerRecord)
            case R.TopicRecord():
                self.topics[record.name] = TopicMeta(
                    name=record.name,
                    topic_id=record.topic_id,
                    replication_factor=record.replication_factor,
                    config=TopicConfig.from_dict(record.config),
                )
            case R.PartitionRecord():
                t = self.topics[record.topic]
                meta = PartitionMeta(
                    topic=record.topic,
                    partition=record.partition,
                    replicas=tuple(record.replicas),
                    isr=tuple(record.isr),
                    leader=record.leader,
                    leader_epoch=record.leader_epoch,
                    partition_epoch=record.partition_epoch,
                    status=record.status,
                    last_election_unclean=record.last_election_unclean,
                    elr=tuple(record.elr or ()),
                )
                if record.partition == len(t.partitions):
                    t.partitions.append(meta)
                else:
                    t.partitions[record.partition] = meta
            case R.RemoveTopicRecord():
                self.topics.pop(record.name, None)
            case R.EntityRecord():
                if record.value is None:
                    named = self.entities.get(record.kind)
                    if named is not None:
                        named.pop(record.name, None)
                        if not named:
                            del self.entities[record.kind]
                else:
                    self.entities.setdefault(record.kind, {})[record.name] = dict(record.value)
            case R.PartitionChangeRecord():
                p = self.partition(record.topic, record.partition)
                if p is None:
                    raise ValueError(f"no partition {record.topic}/{record.partition}")
                changes: dict[str, Any] = {}
                for name in ("isr", "replicas", "elr"):
                    v = getattr(record, name)
                    if v is not None:
                        changes[name] = tuple(v)
                for name in ("leader", "leader_epoch", "status", "last_election_unclean"):
                    v = getattr(record, name)
                    if v is not None:
                        changes[name] = v
                if (
                    record.partition_epoch is not None
                    and record.partition_epoch != p.partition_epoch + 1
                ):
                    raise ValueError(
                        f"{record.topic}/{record.partition}: change to partition epoch "
                        f"{record.partition_epoch} does not follow {p.partition_epoch}"
                    )
                changes["partition_epoch"] = p.partition_epoch + 1
                self.topics[record.topic].partitions[record.partition] = replace(p, **changes)
            case _:
                raise ValueError(f"unknown record {record!r}")
        self.version += 1


def _broker_key(b: BrokerMeta) -> int:
    return b.broker_id


def _partition_to_dict(p: PartitionMeta) -> dict[str, Any]:
    d = asdict(p)
    del d["topic"]
    d["replicas"] = list(p.replicas)
    d["isr"] = list(p.isr)
    d["elr"] = list(p.elr)
    return d
