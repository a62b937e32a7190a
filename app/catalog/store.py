"""Catalog access: open (migrating to head), identity, checkpoints, events.

Synchronous SQLAlchemy on purpose: calls are rare and small; the node runs
the periodic ones in a worker thread so the event loop never waits on disk.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import create_engine, delete, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.catalog.models import (
    MetadataKV,
    NodeIdentity,
    PartitionCheckpoint,
    PartitionEvent,
)

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent.parent / "migrations"


def migrate(engine: Engine) -> None:
    """Bring the schema to Alembic head (idempotent)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


class Catalog:
    def __init__(self, url: str) -> None:
        self.url = url
        connect_args: dict[str, Any] = {}
        if url.startswith("sqlite"):
            connect_args["check_same_thread"] = False
        self.engine = create_engine(url, connect_args=connect_args)
        if url.startswith("sqlite"):

            @event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=FULL")
                cur.close()

        migrate(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._lock = threading.Lock()

    def session(self) -> Session:
        return self._sessions()

    # ---- identity ------------------------------------------------------------------------
    def start(self, node_id: int, now_ms: int) -> bool:
        """Record a start; returns whether the previous run shut down cleanly.

        A data directory that has never been used counts as clean. The flag is
        cleared now and set again only by :meth:`mark_clean_shutdown`.
        """
        with self._lock, self.session() as s, s.begin():
            row = s.get(NodeIdentity, 1)
            if row is None:
                s.add(
                    NodeIdentity(
                        id=1, node_id=node_id, created_ms=now_ms, clean_shutdown=False,
                        last_start_ms=now_ms,
                    )
                )
                return True
            if row.node_id != node_id:
                raise RuntimeError(
                    f"data directory belongs to node {row.node_id}, not {node_id}"
                )
            clean = bool(row.clean_shutdown)
            row.clean_shutdown = False
            row.last_start_ms = now_ms
            return clean

    def mark_clean_shutdown(self) -> None:
        with self._lock, self.session() as s, s.begin():
            row = s.get(NodeIdentity, 1)
            if row is not None:
                row.clean_shutdown = True

    # ---- checkpoints ---------------------------------------------------------------------
    def load_checkpoints(self) -> dict[tuple[str, int], tuple[int, int]]:
        """``{(topic, partition): (high_watermark, recovery_point)}``."""
        with self.session() as s:
            return {
                (r.topic, r.partition): (r.high_watermark, r.recovery_point)
                for r in s.scalars(select(PartitionCheckpoint))
            }

    def save_checkpoints(
        self, rows: Iterable[tuple[str, int, int, int]], now_ms: int
    ) -> None:
        """Upsert ``(topic, partition, hw, recovery_point)`` rows in one transaction.

        SQLite and PostgreSQL get one multi-row ``INSERT .. ON CONFLICT DO
        UPDATE``; ``Session.merge`` (a SELECT per row) was most of an idle
        node's checkpoint cost with a thousand partitions. Other databases
        keep the portable merge.
        """
        rows = list(rows)
        if not rows:
            return
        dialect = self.engine.dialect.name
        if dialect in ("sqlite", "postgresql"):
            if dialect == "sqlite":
                from sqlalchemy.dialects.sqlite import insert
            else:
                from sqlalchemy.dialects.postgresql import insert  # type: ignore[assignment]
            values = [
                {"topic": t, "partition": p, "high_watermark": hw, "recovery_point": rp, "updated_ms": now_ms}
                for t, p, hw, rp in rows
            ]
            with self._lock, self.session() as s, s.begin():
                for i in range(0, len(values), 500):  # SQLite caps bound parameters per statement
                    stmt = insert(PartitionCheckpoint).values(values[i:i + 500])
                    s.execute(stmt.on_conflict_do_update(
                        index_elements=["topic", "partition"],
                        set_={c: stmt.excluded[c] for c in ("high_watermark", "recovery_point", "updated_ms")},
                    ))
            return
        with self._lock, self.session() as s, s.begin():
            for topic, partition, hw, rp in rows:
                s.merge(
                    PartitionCheckpoint(
                        topic=topic, partition=partition, high_watermark=hw,
                        recovery_point=rp, updated_ms=now_ms,
                    )
                )

    def drop_checkpoints(self, topic: str) -> None:
        with self._lock, self.session() as s, s.begin():
            s.execute(delete(PartitionCheckpoint).where(PartitionCheckpoint.topic == topic))

    # ---- history -------------------------------------------------------------------------
    def add_event(
        self,
        topic: str,
        partition: int,
        kind: str,
        reason: str,
        now_ms: int,
        leader_epoch: int | None = None,
        **detail: Any,
    ) -> None:
        with self._lock, self.session() as s, s.begin():
            s.add(
                PartitionEvent(
                    ts_ms=now_ms, topic=topic, partition=partition, kind=kind,
                    leader_epoch=leader_epoch, reason=reason,
                    detail=orjson.dumps(detail).decode(),
                )
            )

    def add_events(self, events: list[dict[str, Any]]) -> None:
        """Insert many events in one transaction (one fsync): leader changes come in bursts."""
        if not events:
            return
        with self._lock, self.session() as s, s.begin():
            for e in events:
                s.add(
                    PartitionEvent(
                        ts_ms=e["ts_ms"], topic=e["topic"], partition=e["partition"],
                        kind=e["kind"], leader_epoch=e.get("leader_epoch"),
                        reason=e.get("reason", ""),
                        detail=orjson.dumps(e.get("detail", {})).decode(),
                    )
                )

    def events(self, topic: str, partition: int, limit: int = 100) -> list[dict[str, Any]]:
        """Newest first."""
        with self.session() as s:
            rows = s.scalars(
                select(PartitionEvent)
                .where(PartitionEvent.topic == topic, PartitionEvent.partition == partition)
                .order_by(PartitionEvent.id.desc())
                .limit(limit)
            )
            return [
                {
                    "ts_ms": r.ts_ms, "kind": r.kind, "leader_epoch": r.leader_epoch,
                    "reason": r.reason, "detail": orjson.loads(r.detail),
                }
                for r in rows
            ]

    # ---- local metadata key-value log (standalone node) ----------------------------------
    def load_metadata_kv(self) -> dict[str, Any]:
        with self.session() as s:
            return {r.key: orjson.loads(r.value) for r in s.scalars(select(MetadataKV))}

    def write_metadata_kv(self, updates: dict[str, Any | None]) -> None:
        """Apply key updates atomically (None deletes the key)."""
        with self._lock, self.session() as s, s.begin():
            for k, v in updates.items():
                if v is None:
                    s.execute(delete(MetadataKV).where(MetadataKV.key == k))
                else:
                    s.merge(MetadataKV(key=k, value=orjson.dumps(v).decode()))

    def close(self) -> None:
        self.engine.dispose()
