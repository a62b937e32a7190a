"""SQLAlchemy models of the local catalog (ARCHITECTURE.md layer 6).

Records never go through SQL; these tables hold identity, checkpoints and
history, which change a few times a second at most. Schema changes go
through Alembic revisions in ``migrations/``.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class NodeIdentity(Base):
    """One row: who this data directory belongs to, and whether it shut down cleanly."""

    __tablename__ = "node_identity"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    node_id: Mapped[int] = mapped_column(Integer)
    created_ms: Mapped[int] = mapped_column(BigInteger)
    clean_shutdown: Mapped[bool] = mapped_column(Boolean, default=False)
    last_start_ms: Mapped[int] = mapped_column(BigInteger)


class PartitionCheckpoint(Base):
    """Per-partition HW and recovery point, written periodically and at shutdown."""

    __tablename__ = "partition_checkpoints"
    topic: Mapped[str] = mapped_column(String(255), primary_key=True)
    partition: Mapped[int] = mapped_column(Integer, primary_key=True)
    high_watermark: Mapped[int] = mapped_column(BigInteger)
    recovery_point: Mapped[int] = mapped_column(BigInteger)
    updated_ms: Mapped[int] = mapped_column(BigInteger)


class PartitionEvent(Base):
    """History of partition state changes (elections, ISR changes, truncations) with reasons."""

    __tablename__ = "partition_events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ts_ms: Mapped[int] = mapped_column(BigInteger)
    topic: Mapped[str] = mapped_column(String(255))
    partition: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(64))
    leader_epoch: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    detail: Mapped[str] = mapped_column(Text, default="{}")
    __table_args__ = (Index("ix_partition_events_tp", "topic", "partition", "id"),)


class MetadataKV(Base):
    """Controller metadata of a standalone node (no voters configured), as key-value rows.

    Same keys and values a raft-replicated controller commits
    (``replication/controller/kv.py``); in a cluster raftos holds them instead.
    """

    __tablename__ = "metadata_kv"
    key: Mapped[str] = mapped_column(String(600), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
