"""Commands the controller state machine accepts, and its settings.

Commands are plain data; the HTTP layer builds them from internal requests
(see ``machine.py`` for what each one does). Time never hides in here: every
time-dependent command takes ``now_ms`` from the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replication.controller.image import TopicConfig


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Timeouts of the active controller (all milliseconds).

    ``session_timeout_ms``: a broker without a heartbeat for this long is
    fenced (Kafka's ``broker.session.timeout.ms``, 9 s).
    ``election_timeout_ms``: a chosen candidate must confirm leadership within
    this, else the next candidate is tried (seed 002 wait-for-response).
    ``suspect_window_ms``: leader-suspect reports count toward the ISR majority
    only while younger than this (seed 000 "within a bounded period").
    ``offline_retry_ms``: an offline partition whose candidates all timed out
    is retried this long after it went offline, in case they were merely slow
    (seed 002 only retries when an SPU comes back; we also retry on a timer so
    a slow-but-alive candidate cannot leave a partition offline forever).
    """

    session_timeout_ms: int = 9_000
    election_timeout_ms: int = 5_000
    suspect_window_ms: int = 10_000
    offline_retry_ms: int = 10_000


@dataclass(frozen=True, slots=True)
class CreateTopic:
    """``POST /v1/topics``: idempotent when the same spec is repeated."""

    name: str
    partitions: int
    replication_factor: int
    config: TopicConfig


@dataclass(frozen=True, slots=True)
class AlterPartition:
    """An ISR change from the partition leader (seed 001 §6.3 rule 4, §6.5.1, §6.5.2).

    ``broker_id``/``broker_epoch``: the sending leader and its current epoch.
    ``leader_epoch``/``partition_epoch``: the partition state the leader based
    the change on; both must equal the controller's.
    ``new_isr``: the proposed ISR, leader included.
    ``broker_epochs``: broker id → broker epoch the leader observed in that
    follower's fetches; required for every member being *added*, checked for
    any other member given.
    """

    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LeaderSuspect:
    """A follower has had no successful fetch from its leader for ``leader_timeout_ms``.

    Like Liftbridge (seed 000 "Partition Leader Failure") the report carries the
    partition and leader epochs it was made under, so a report about an older
    leader is refused. ``log_end_offset`` is the reporter's LEO (-1 when
    unknown); it feeds the smallest-lag choice of the election that may follow.
    """

    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    log_end_offset: int = -1


@dataclass(frozen=True, slots=True)
class ConfirmLeadership:
    """A chosen candidate has taken up leadership at ``leader_epoch`` (seed 002
    "Promotion Successful"); the partition goes ``online``."""

    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class PutEntity:
    """Set or delete (``value=None``) one configuration entity.

    ``expect`` makes the write conditional: ``"absent"`` (create only, refused
    with ``ENTITY_EXISTS`` unless the stored value is identical, so a repeated
    create is idempotent), ``"present"`` (update only, ``ENTITY_NOT_FOUND``
    otherwise) or ``None`` (unconditional; deleting a missing entity is a no-op).
    """

    kind: str
    name: str
    value: dict[str, Any] | None
    expect: str | None = None
