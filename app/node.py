"""The node: one per process; wires storage, catalog, metadata and partitions.

Owns lifecycle (start, background loops, clean-shutdown marker, stop). The
HTTP layer calls into it; it never calls back into HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import uuid
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from app.catalog import Catalog
from app.errors import ApiError
from app.metadata import LocalMetadata
from app.metrics import Metrics
from app.partition import PartitionReplica, log_config, now_ms
from app.records import ProducedRecord
from app.settings import Settings
from app.storage import PartitionLog
from replication.controller import records as R
from replication.controller.image import TopicMeta

log = logging.getLogger("tidelog.node")

# Deleted partition directories are renamed to this prefix before removal; ``~`` cannot
# appear in a topic name, so no partition directory ever matches it.
DELETED_PREFIX = ".deleted~"


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Stable across nodes, restarts and Python versions (CRC-32 of the UTF-8 key)."""
    return zlib.crc32(key) % num_partitions


class Node:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.data_dir = settings.data_dir
        self.logs_dir = self.data_dir / "logs"
        self.catalog: Catalog | None = None
        self.metadata: LocalMetadata | None = None
        self.partitions: dict[tuple[str, int], PartitionReplica] = {}
        self.metrics = Metrics(self)
        self.broker_epoch = -1
        self.ready = False
        self.clean_start = True
        self._sticky: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._checkpoints: dict[tuple[str, int], tuple[int, int]] = {}

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        # Directories of deleted partitions whose removal a crash interrupted.
        for leftover in self.logs_dir.glob(f"{DELETED_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        self.catalog = Catalog(self.settings.resolved_catalog_url)
        self.clean_start = self.catalog.start(self.settings.node_id, now_ms())
        self._checkpoints = self.catalog.load_checkpoints()
        self.metadata = LocalMetadata(self.catalog)
        self.metadata.load()
        self.metadata.add_listener(self._on_records)
        self._reconcile()
        self.broker_epoch = await self.metadata.register_broker(
            self.settings.node_id, self.settings.url, self.settings.zone, self.clean_start
        )
        self._tasks = [
            asyncio.create_task(self._every(self.settings.checkpoint_interval_ms, self.checkpoint)),
            asyncio.create_task(
                self._every(self.settings.retention_check_interval_ms, self.enforce_retention)
            ),
        ]
        if self.settings.fsync_policy == "interval":
            self._tasks.append(
                asyncio.create_task(self._every(self.settings.fsync_interval_ms, self.flush))
            )
        self.ready = True
        log.info(
            "node %s ready at %s (%s start, %d partitions)",
            self.settings.node_id, self.settings.url,
            "clean" if self.clean_start else "unclean", len(self.partitions),
        )

    async def stop(self) -> None:
        self.ready = False
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for p in self.partitions.values():
            p.close_waiters()
        if self.settings.fsync_policy != "never":
            await self.flush()
        await self.checkpoint()
        for p in self.partitions.values():
            p.log.close()
        if self.catalog is not None:
            self.catalog.mark_clean_shutdown()
            self.catalog.close()

    async def _every(self, interval_ms: int, fn: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await fn()
            except Exception:  # a background failure must not kill the loop
                log.exception("background task %s failed", getattr(fn, "__name__", fn))

    async def flush(self) -> None:
        logs = [p.log for p in self.partitions.values()]
        await asyncio.to_thread(lambda: [lg.flush() for lg in logs])

    async def checkpoint(self) -> None:
        rows = [
            (t, p, r.high_watermark, r.log.recovery_point)
            for (t, p), r in self.partitions.items()
        ]
        if rows and self.catalog is not None:
            await asyncio.to_thread(self.catalog.save_checkpoints, rows, now_ms())

    async def enforce_retention(self) -> None:
        t = now_ms()
        for r in list(self.partitions.values()):
            if r.log.enforce_retention(t, r.high_watermark):
                self.metrics.retention_segments_deleted.inc()

    # ---- metadata → local replicas -------------------------------------------------------
    @property
    def image(self):  # type: ignore[no-untyped-def]
        assert self.metadata is not None
        return self.metadata.image

    def _on_records(self, records: list[R.Record]) -> None:
        removed = {r.name for r in records if isinstance(r, R.RemoveTopicRecord)}
        for name in removed:
            self._drop_topic(name)
        self._reconcile()

    def _reconcile(self) -> None:
        """Open a replica for every partition assigned to this broker in the image."""
        me = self.settings.node_id
        for topic in self.image.topics.values():
            for meta in topic.partitions:
                key = (topic.name, meta.partition)
                if me not in meta.replicas or key in self.partitions:
                    continue
                self.partitions[key] = self._open_replica(topic, meta.partition)

    def _partition_dir(self, topic: str, partition: int) -> Path:
        return self.logs_dir / f"{topic}-{partition}"

    def _open_replica(self, topic: TopicMeta, partition: int) -> PartitionReplica:
        meta = topic.partitions[partition]
        hw, rp = self._checkpoints.get((topic.name, partition), (0, None))
        plog = PartitionLog(
            self._partition_dir(topic.name, partition),
            log_config(topic.config, self.settings.index_interval_bytes),
            recovery_point=None if self.clean_start else (rp or 0),
        )
        if plog.recovery.bytes_truncated or plog.recovery.segments_deleted:
            assert self.catalog is not None
            self.catalog.add_event(
                topic.name, partition, "recovery_truncation",
                "torn or corrupt tail found at start", now_ms(),
                bytes_truncated=plog.recovery.bytes_truncated,
                segments_deleted=plog.recovery.segments_deleted,
                log_end_offset=plog.log_end_offset,
            )
        return PartitionReplica(
            topic.name, meta, topic.config, plog, self.settings.node_id, hw
        )

    def _drop_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            replica = self.partitions.pop(key)
            replica.close_waiters()
            replica.log.close()
            # Rename first so a new topic of the same name never sees the old files. The
            # new name is short: a 249-character topic plus a suffix would pass NAME_MAX.
            src = self._partition_dir(*key)
            dst = self.logs_dir / f"{DELETED_PREFIX}{uuid.uuid4().hex}"
            src.rename(dst)
            shutil.rmtree(dst, ignore_errors=True)
            self._checkpoints.pop(key, None)
        if self.catalog is not None:
            self.catalog.drop_checkpoints(name)
        self._sticky.pop(name, None)

    # ---- lookups used by the API ---------------------------------------------------------
    def topic(self, name: str) -> TopicMeta:
        t = self.image.topics.get(name)
        if t is None:
            raise ApiError("TOPIC_NOT_FOUND", f"topic {name!r} does not exist")
        return t

    def replica(self, topic: str, partition: int) -> PartitionReplica:
        t = self.topic(topic)
        if not 0 <= partition < len(t.partitions):
            raise ApiError(
                "PARTITION_NOT_FOUND",
                f"topic {topic!r} has partitions 0..{len(t.partitions) - 1}, not {partition}",
            )
        r = self.partitions.get((topic, partition))
        if r is None:
            raise ApiError("NOT_LEADER", f"{topic}/{partition} is not served by this node")
        return r

    def route(
        self, topic: TopicMeta, records: list[ProducedRecord], fixed: int | None
    ) -> dict[int, list[int]]:
        """Record indexes per partition, in request order.

        Explicit partition first, then the key hash; keyless records of one
        request stick to one partition (one batch per request), and the next
        request moves on, so keyless load spreads without splitting batches.
        """
        n = len(topic.partitions)
        groups: dict[int, list[int]] = {}
        sticky = -1
        for i, r in enumerate(records):
            if fixed is not None:
                p = fixed
            elif r.partition is not None:
                p = r.partition
            elif r.key_bytes is not None:
                p = partition_for_key(r.key_bytes, n)
            else:
                if sticky < 0:
                    sticky = self._sticky.get(topic.name, -1) + 1
                    sticky %= n
                    self._sticky[topic.name] = sticky
                p = sticky
            groups.setdefault(p, []).append(i)
        return groups
