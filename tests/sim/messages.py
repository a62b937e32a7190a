"""Wire messages of the simulated cluster (the HTTP layer's stand-ins)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replication.core.messages import FetchRequest, FetchResponse

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Fetch:
    key: Key
    req: FetchRequest


@dataclass(frozen=True, slots=True)
class FetchReply:
    key: Key
    req: FetchRequest
    resp: FetchResponse
    records: tuple[tuple[int, int], ...]  # (leader epoch, record id) from resp.fetch_offset


@dataclass(frozen=True, slots=True)
class ControllerCall:
    """A broker → controller request: ``kind`` names the machine method."""

    corr: int
    kind: str
    payload: Any


@dataclass(frozen=True, slots=True)
class ControllerReply:
    corr: int
    error: str | None
    result: Any = None


@dataclass(frozen=True, slots=True)
class Produce:
    corr: int
    key: Key
    acks: str  # none | leader | all
    record: int


@dataclass(frozen=True, slots=True)
class ProduceReply:
    corr: int
    error: str | None
    offset: int = -1


@dataclass(frozen=True, slots=True)
class Consume:
    corr: int
    key: Key
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumeReply:
    corr: int
    error: str | None
    leader_epoch: int
    hw: int = -1
    records: tuple[int, ...] = ()
