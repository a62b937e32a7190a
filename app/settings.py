"""Node settings: flags and ``TIDELOG_*`` environment variables (pydantic-settings).

Defaults run a single node with everything embedded: data under ``./data``,
a SQLite catalog inside it, HTTP on 127.0.0.1:8080.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TIDELOG_", extra="ignore")

    node_id: int = Field(1, ge=0, description="This broker's id, unique in the cluster.")
    host: str = Field("127.0.0.1", description="Interface to listen on (0.0.0.0 in containers).")
    port: int = Field(8080, ge=0, le=65535)
    advertised_url: str | None = Field(
        None, description="URL other nodes and clients use to reach this node."
    )
    zone: str | None = Field(None, description="Failure zone (rack/AZ) for replica placement.")
    data_dir: Path = Field(Path("data"), description="Partition logs and the SQLite catalog.")
    catalog_url: str | None = Field(
        None, description="SQLAlchemy URL of the local catalog; default SQLite in data_dir."
    )
    fsync_policy: Literal["never", "interval", "always"] = Field(
        "interval",
        description="never: leave flushing to the OS; interval: fsync every fsync_interval_ms; "
        "always: fsync before acknowledging a produce.",
    )
    fsync_interval_ms: int = Field(1000, ge=1)
    max_request_bytes: int = Field(8 * 1024 * 1024, ge=1024, description="Request body limit.")
    max_fetch_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Cap on max_bytes.")
    index_interval_bytes: int = Field(4096, ge=64)
    retention_check_interval_ms: int = Field(30_000, ge=10)
    checkpoint_interval_ms: int = Field(5_000, ge=10)
    default_segment_bytes: int = Field(134_217_728, ge=1024)
    default_segment_ms: int = Field(604_800_000, ge=1)
    voters: str = Field(
        "",
        description="Controller voters: comma-separated id=http_url@raft_host:raft_port. "
        "Empty: a standalone node that is its own controller.",
    )
    cluster_secret: str = Field(
        "", description="Shared secret for /internal endpoints and raft encryption."
    )
    heartbeat_interval_ms: int = Field(1000, ge=10)
    session_timeout_ms: int = Field(6000, ge=100)
    election_timeout_ms: int = Field(5000, ge=100)
    controller_tick_ms: int = Field(200, ge=10)
    metadata_wait_ms: int = Field(5000, ge=10, description="Metadata long-poll duration.")
    replica_lag_time_ms: int = Field(
        10_000, ge=10, description="A follower not caught up for this long leaves the ISR."
    )
    replica_lag_max_records: int = Field(
        0, ge=0, description="A follower this many records behind leaves the ISR (0: off)."
    )
    leader_timeout_ms: int = Field(
        5_000, ge=10, description="A follower without a successful fetch this long reports "
        "its leader as suspect to the controller.",
    )
    alter_partition_retry_ms: int = Field(2_000, ge=10)
    replica_fetch_wait_ms: int = Field(500, ge=0, description="Replica fetch long-poll time.")
    replica_fetch_max_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    replica_fetch_timeout_ms: int = Field(
        5_000, ge=100, description="Replica fetch timeout on top of replica_fetch_wait_ms."
    )
    replica_fetch_backoff_ms: int = Field(50, ge=1)
    replica_fetch_backoff_ms_max: int = Field(1_000, ge=1)
    replica_tick_ms: int = Field(100, ge=5, description="ISR and suspicion checks interval.")
    forward_timeout_ms: int = Field(30_000, ge=100)
    webhook_allowed_networks: str = Field(
        "",
        description="Push subscription targets may resolve into these CIDRs (comma-separated) "
        "besides public unicast addresses; e.g. 10.0.0.0/8,127.0.0.0/8. Empty: public only.",
    )
    webhook_allowed_hosts: str = Field(
        "",
        description="If set, push subscription target host names must be one of these "
        "(comma-separated; *.example.com matches subdomains). Addresses are checked too.",
    )
    webhook_cursor_commit_ms: int = Field(
        500, ge=10, description="How often push subscription cursors are committed to metadata "
        "(the at-least-once redelivery window after a failover).",
    )
    log_level: str = Field("info")
    access_log: bool = Field(False, description="uvicorn access log (costly on the hot path).")

    @field_validator("webhook_allowed_networks")
    @classmethod
    def _networks(cls, v: str) -> str:
        from app.subscriptions.ssrf import parse_networks

        parse_networks(v)  # a typo must stop the node, not silently allow nothing
        return v

    @property
    def url(self) -> str:
        if self.advertised_url:
            return self.advertised_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    @property
    def resolved_catalog_url(self) -> str:
        return self.catalog_url or f"sqlite:///{self.data_dir.resolve() / 'catalog.db'}"
