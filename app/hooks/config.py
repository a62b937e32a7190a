"""Per-topic hook configuration: what to verify, where the delivery id and key come from.

Stored as the cluster metadata entity ``("hook", <topic>)`` with ``"topic"``
set, so it reaches every broker with the metadata deltas, survives controller
failover, and is deleted with its topic. A topic without a config accepts
unsigned deliveries with the defaults below; a config with a ``signature``
makes every delivery prove it holds a secret.

Secrets are kept in the metadata log like every other setting (on the voters'
disks and in each broker's memory); the API never returns them.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_KEEP_HEADERS = (
    "content-type",
    "user-agent",
    "x-github-event",
    "x-github-delivery",
    "x-github-hook-id",
    "x-request-id",
)
"""Request headers stored on the record when the config names none (lower case)."""

_HEADER_RE = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$"
_HEADER = re.compile(_HEADER_RE)


class ValueSource(BaseModel):
    """Where a value comes from: a request header, or a JSON pointer (RFC 6901) into a JSON body."""

    model_config = ConfigDict(extra="forbid")
    header: str | None = Field(None, pattern=_HEADER_RE)
    json_pointer: str | None = Field(None, pattern=r"^(/[^/]*)*$", max_length=512)

    @model_validator(mode="after")
    def _exactly_one(self) -> ValueSource:
        if (self.header is None) == (self.json_pointer is None):
            raise ValueError("give exactly one of 'header' or 'json_pointer'")
        return self


class SignatureConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    scheme: Literal["github", "stripe"]
    secrets: list[str] = Field(
        ..., min_length=1, max_length=4,
        description="Accepted secrets (several while rotating). Write-only: never returned.",
    )
    tolerance_s: int = Field(300, ge=1, le=86_400, description="stripe: accepted clock distance of t=.")

    @model_validator(mode="after")
    def _secrets_not_empty(self) -> SignatureConfig:
        if any(not s or len(s) > 512 for s in self.secrets):
            raise ValueError("each secret is 1..512 characters")
        return self


class HookConfig(BaseModel):
    """``PUT /v1/hooks/{topic}/config`` body; every field optional."""

    model_config = ConfigDict(extra="forbid")
    signature: SignatureConfig | None = None
    delivery_id: ValueSource | None = Field(
        None,
        description="Where the sender's delivery id is; replays of one id within the window are "
        "stored once. Default: X-GitHub-Delivery for github, the JSON body's /id for stripe, none otherwise.",
    )
    key: ValueSource | None = Field(
        None, description="Where the record key comes from. Default: the delivery id, if any."
    )
    dedupe_window_ms: int = Field(86_400_000, ge=0, le=30 * 86_400_000, description="0 turns dedupe off.")
    keep_headers: list[str] = Field(
        default_factory=lambda: list(DEFAULT_KEEP_HEADERS), max_length=64,
        description="Request headers stored as record headers (case-insensitive).",
    )
    acks: Literal["all", "leader", "none"] = "all"
    timeout_ms: int = Field(5_000, ge=1, le=120_000)
    parse_json: bool = Field(
        True, description="Store a JSON body as a JSON value (false: as the exact text)."
    )

    @model_validator(mode="after")
    def _headers_valid(self) -> HookConfig:
        for h in self.keep_headers:
            if not _HEADER.match(h):
                raise ValueError(f"invalid header name {h!r}")
        self.keep_headers = sorted({h.lower() for h in self.keep_headers})
        return self

    def effective_delivery_id(self) -> ValueSource | None:
        if self.delivery_id is not None or self.signature is None:
            return self.delivery_id
        if self.signature.scheme == "github":
            return ValueSource(header="X-GitHub-Delivery")
        return ValueSource(json_pointer="/id")

    def to_entity(self, topic: str) -> dict[str, Any]:
        return {"topic": topic, **self.model_dump(mode="json")}

    @classmethod
    def from_entity(cls, value: dict[str, Any] | None) -> HookConfig:
        if value is None:
            return DEFAULT_CONFIG
        return cls.model_validate({k: v for k, v in value.items() if k != "topic"})

    def public(self, topic: str) -> dict[str, Any]:
        """The config as GET shows it: secrets replaced by their count."""
        d = self.to_entity(topic)
        if self.signature is not None:
            sig = d["signature"]
            sig["secret_count"] = len(sig.pop("secrets"))
        eff = self.effective_delivery_id()
        d["effective_delivery_id"] = eff.model_dump(exclude_none=True) if eff else None
        return d


DEFAULT_CONFIG = HookConfig()
