"""Metadata records: the only things committed to the metadata log.

Each record is a small frozen dataclass with a JSON form (``to_dict`` /
``from_dict``) so the raftos adapter can store it and brokers can receive it
over HTTP. Records carry absolute values, never increments, so applying a
record twice by mistake is visible rather than silently drifting.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class Record:
    TYPE: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["type"] = self.TYPE
        return d


@dataclass(frozen=True, slots=True)
class ClusterRecord(Record):
    TYPE: ClassVar[str] = "cluster"
    cluster_id: str


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord(Record):
    TYPE: ClassVar[str] = "register_broker"
    broker_id: int
    url: str
    zone: str | None
    broker_epoch: int
    clean: bool


@dataclass(frozen=True, slots=True)
class TopicRecord(Record):
    TYPE: ClassVar[str] = "topic"
    name: str
    topic_id: str
    replication_factor: int
    config: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PartitionRecord(Record):
    TYPE: ClassVar[str] = "partition"
    topic: str
    partition: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    status: str
    last_election_unclean: bool = False
    elr: list[int] | None = None


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord(Record):
    """The broker's session at ``broker_epoch`` ended (seed 001 §6.5.1).

    Fencing does not end the epoch: a heartbeat at the same epoch unfences it.
    The ISR removals and re-elections that follow are separate
    ``PartitionChangeRecord`` records in the same decision, so every record says
    exactly what changed. A fence of an older epoch than the broker's current
    one is a no-op when applied.
    """

    TYPE: ClassVar[str] = "fence_broker"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord(Record):
    """A heartbeat at the current ``broker_epoch`` arrived after a fence (seed 001 §6.5.1)."""

    TYPE: ClassVar[str] = "unfence_broker"
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord(Record):
    """Changes of one partition; ``None`` fields are unchanged. Bumps partition_epoch.

    ``partition_epoch`` is the absolute epoch after the change; when given,
    applying checks it is exactly one more than the image's (a record applied
    twice or out of order fails loudly instead of drifting). ``None`` (older
    records) means "current + 1".
    """

    TYPE: ClassVar[str] = "partition_change"
    topic: str
    partition: int
    isr: list[int] | None = None
    replicas: list[int] | None = None
    leader: int | None = None
    leader_epoch: int | None = None
    status: str | None = None
    last_election_unclean: bool | None = None
    partition_epoch: int | None = None
    elr: list[int] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord(Record):
    TYPE: ClassVar[str] = "remove_topic"
    name: str


@dataclass(frozen=True, slots=True)
class EntityRecord(Record):
    """Sets (or, with ``value=None``, deletes) one named configuration entity.

    Entities are the cluster-wide settings that are not topics or partitions:
    inbound hook configs, push subscriptions and their cursors. They ride the
    same committed metadata log, so every broker sees the same value at the same
    metadata version and a controller failover keeps them. The value is the
    absolute new value (records never carry increments).
    """

    TYPE: ClassVar[str] = "entity"
    kind: str
    name: str
    value: dict[str, Any] | None


RECORD_TYPES: dict[str, type[Record]] = {
    cls.TYPE: cls
    for cls in (
        ClusterRecord,
        RegisterBrokerRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        TopicRecord,
        PartitionRecord,
        PartitionChangeRecord,
        RemoveTopicRecord,
        EntityRecord,
    )
}


def record_from_dict(d: dict[str, Any]) -> Record:
    """Inverse of ``Record.to_dict``; raises ``KeyError``/``TypeError`` on a malformed record."""
    d = dict(d)
    cls = RECORD_TYPES[d.pop("type")]
    return cls(**d)
