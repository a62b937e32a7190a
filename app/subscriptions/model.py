"""Push subscriptions as stored in cluster metadata, and their per-partition state.

Two entity kinds (``replication.controller.records.EntityRecord``):

* ``subscription`` / ``<id>``: the configuration, written by the API.
* ``subscription_state`` / ``<id>.<partition>``: the cursor (next offset to
  deliver) and counters, written only by the broker delivering that
  partition. One entity per partition because different partitions are
  delivered by different brokers and entity writes are absolute values: a
  shared entity would let two brokers overwrite each other's progress.

Both carry ``"topic"``, so deleting the topic deletes them in the same
controller decision. Both carry the subscription's ``uid`` (random, set at
creation): a state left behind by a deleted subscription (a cursor commit
racing the delete) never becomes the cursor of a new subscription that
reuses the id.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SUBSCRIPTION = "subscription"
STATE = "subscription_state"
ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

RESERVED_HEADERS = frozenset(
    ("host", "content-length", "content-type", "transfer-encoding", "connection", "user-agent")
)
"""Set by the sender; user headers may not replace them (nor any ``tidelog-*`` header)."""


class SubscriptionSpec(BaseModel):
    """What a client sends to create a subscription (POST /v1/subscriptions)."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(None, description="^[A-Za-z0-9._-]{1,64}$; generated when absent")
    topic: str
    partitions: list[int] | None = Field(None, description="partitions to deliver; null = all")
    url: str = Field(..., max_length=2048, description="http(s) target; see TIDELOG_WEBHOOK_ALLOWED_NETWORKS")
    start: Literal["earliest", "latest"] | int = Field(
        "latest", description="where delivery starts on each partition: earliest, latest, or an offset"
    )
    batch_size: int = Field(100, ge=1, le=10_000, description="records per request, at most")
    max_batch_bytes: int = Field(1 << 20, ge=1024, le=16 << 20, description="served JSON per request")
    headers: dict[str, str] = Field(default_factory=dict, description="added to every request")
    secret: str | None = Field(
        None, min_length=16, max_length=256,
        description="HMAC-SHA256 key for Tidelog-Signature; write-only (GET shows secret_set)",
    )
    max_attempts: int = Field(10, ge=1, le=1_000, description="attempts per batch before dead-lettering")
    max_age_ms: int = Field(
        3_600_000, ge=1, description="since a batch's first attempt; past it the batch is dead-lettered"
    )
    retry_backoff_ms: int = Field(500, ge=1, description="base of the exponential backoff (full jitter)")
    retry_backoff_max_ms: int = Field(60_000, ge=1, description="cap of the backoff")
    timeout_ms: int = Field(10_000, ge=100, le=300_000, description="per request")
    dead_letter_topic: str | None = Field(None, description="default <topic>.dlq.<id>, created if missing")
    paused: bool = False

    @field_validator("id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not ID_RE.match(v):
            raise ValueError("id must match ^[A-Za-z0-9._-]{1,64}$")
        return v

    @field_validator("start")
    @classmethod
    def _start(cls, v: str | int) -> str | int:
        if isinstance(v, int) and v < 0:
            raise ValueError("start offset must be >= 0")
        return v

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return None
        if not v or any(p < 0 for p in v) or len(set(v)) != len(v):
            raise ValueError("partitions must be a non-empty list of distinct partition numbers")
        return sorted(v)

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            low = name.lower()
            if low in RESERVED_HEADERS or low.startswith("tidelog-"):
                raise ValueError(f"header {name!r} is set by tidelog")
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name) or any(c in value for c in "\r\n\0"):
                raise ValueError(f"header {name!r} is not a valid HTTP header")
        return v


class SubscriptionPatch(BaseModel):
    """``PATCH /v1/subscriptions/{id}``: the settings that may change in place.

    The cursor (``uid``) is kept, so delivery resumes where it was with the new
    settings. What a subscription *is* (id, topic, partitions, start, dead-letter
    topic) does not change: delete and re-create with ``start`` set to the cursor
    for that. ``secret: null`` removes the signing secret.
    """

    model_config = ConfigDict(extra="forbid")
    url: str | None = Field(None, max_length=2048)
    headers: dict[str, str] | None = None
    secret: str | None = Field(None, min_length=16, max_length=256)
    batch_size: int | None = None
    max_batch_bytes: int | None = None
    max_attempts: int | None = None
    max_age_ms: int | None = None
    retry_backoff_ms: int | None = None
    retry_backoff_max_ms: int | None = None
    timeout_ms: int | None = None
    paused: bool | None = None


def patched_spec(stored: dict[str, Any], patch: dict[str, Any]) -> SubscriptionSpec:
    """The full spec after ``patch`` (only the keys the client sent), validated like a create."""
    fields = set(SubscriptionSpec.model_fields)
    current = {k: v for k, v in stored.items() if k in fields}
    return SubscriptionSpec.model_validate({**current, **patch})


def new_id() -> str:
    return "sub-" + secrets.token_hex(6)


def spec_value(spec: SubscriptionSpec, sub_id: str, dlq: str) -> dict[str, Any]:
    """The stored configuration (without uid/created_ms, which ``stored_value`` adds)."""
    d = spec.model_dump()
    d["id"] = sub_id
    d["dead_letter_topic"] = dlq
    return d


def same_spec(stored: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether a create repeats an existing subscription (idempotent 200, not 409)."""
    ignore = {"uid", "created_ms", "paused"}
    return {k: v for k, v in stored.items() if k not in ignore} == {
        k: v for k, v in wanted.items() if k not in ignore
    }


def stored_value(wanted: dict[str, Any], created_ms: int) -> dict[str, Any]:
    return {**wanted, "uid": secrets.token_hex(8), "created_ms": created_ms}


def state_name(sub_id: str, partition: int) -> str:
    return f"{sub_id}.{partition}"


def partitions_of(cfg: dict[str, Any], num_partitions: int) -> list[int]:
    """The partitions a subscription delivers (those that exist)."""
    wanted = cfg.get("partitions")
    if wanted is None:
        return list(range(num_partitions))
    return [p for p in wanted if p < num_partitions]


@dataclass(slots=True)
class PartitionState:
    """Cursor and counters of one (subscription, partition); the ``subscription_state`` value.

    ``cursor`` is the next offset to deliver (-1 until delivery started and
    resolved ``start``). ``attempts`` counts the failed attempts of the batch
    being delivered now (0 when the last one succeeded); ``delivered`` counts
    records acknowledged with a 2xx (a redelivered record counts again).
    """

    topic: str
    subscription: str
    uid: str
    partition: int
    cursor: int = -1
    delivered: int = 0
    dead_lettered: int = 0
    skipped: int = 0
    requests: int = 0
    failures: int = 0
    last_success_ms: int | None = None
    last_error: str | None = None
    last_error_ms: int | None = None
    attempts: int = 0
    high_watermark: int = -1
    leader: int = -1
    leader_epoch: int = -1
    """Leader epoch of the delivering broker; a commit from an older epoch is dropped."""
    updated_ms: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_value(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("extra")
        return d

    @classmethod
    def from_value(cls, v: dict[str, Any]) -> PartitionState:
        known = {k: v[k] for k in cls.__dataclass_fields__ if k in v and k != "extra"}
        return cls(**known)

    def lag(self) -> int:
        if self.cursor < 0 or self.high_watermark < 0:
            return 0
        return max(0, self.high_watermark - self.cursor)


_SENSITIVE_HEADER = re.compile(r"auth|cookie|token|secret|key|pass|signature|credential", re.IGNORECASE)


def public_view(cfg: dict[str, Any]) -> dict[str, Any]:
    """The configuration as GET shows it: the secret is write-only, and so are the values
    of headers that look like credentials (``Authorization``, ``X-Api-Key``, ...)."""
    out = {k: v for k, v in cfg.items() if k not in ("secret", "uid")}
    out["secret_set"] = bool(cfg.get("secret"))
    out["headers"] = {
        k: "<redacted>" if _SENSITIVE_HEADER.search(k) else v for k, v in (cfg.get("headers") or {}).items()
    }
    return out
