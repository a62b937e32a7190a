"""The node: one per process; wires storage, catalog, metadata and partitions.

Owns lifecycle (start, background loops, clean-shutdown marker, stop). The
HTTP layer calls into it; it never calls back into HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import uuid
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from app.catalog import Catalog
from app.cluster.agent import BrokerAgent
from app.cluster.config import Voter, parse_voters
from app.cluster.controller import ControllerService
from app.cluster.metadata_log import LocalMetadataLog, MetadataLog
from app.cluster.peers import Peers
from app.errors import ApiError
from app.metrics import Metrics
from app.partition import PartitionReplica, log_config, now_ms
from app.purgatory import OffsetWaiters
from app.records import ProducedRecord
from app.replica.driver import ReplicationDriver
from app.settings import Settings
from app.storage import PartitionLog
from app.subscriptions.manager import SubscriptionManager
from app.tasks import cancel_and_wait
from replication.controller.commands import ControllerSettings
from replication.controller.image import MetadataImage, PartitionMeta, TopicMeta

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
        self.voters: dict[int, Voter] = parse_voters(settings.voters)
        self.mlog: MetadataLog | None = None
        self.controller: ControllerService | None = None
        self.agent: BrokerAgent | None = None
        self.peers = Peers(settings.cluster_secret or secrets.token_hex(16))
        self.partitions: dict[tuple[str, int], PartitionReplica] = {}
        self.metrics = Metrics(self)
        self.replication = ReplicationDriver(self)
        self.subscriptions = SubscriptionManager(self)
        self.ready = False
        self.clean_start = True
        self._sticky: dict[str, int] = {}
        self._saved_checkpoints: dict[tuple[str, int], tuple[int, int]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._checkpoints: dict[tuple[str, int], tuple[int, int]] = {}
        self._reconcile_task: asyncio.Task[None] | None = None
        self._confirming: set[tuple[str, int, int]] = set()
        self._reconcile_wanted = False
        self._reconciled = OffsetWaiters()  # metadata version the local replicas reflect
        self._reconciled.value = -1

    @property
    def standalone(self) -> bool:
        """No voters configured: this node is its own controller (metadata in the catalog)."""
        return not self.voters

    @property
    def is_voter(self) -> bool:
        return self.standalone or self.settings.node_id in self.voters

    @property
    def broker_epoch(self) -> int:
        return self.agent.broker_epoch if self.agent else -1

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        # Directories of deleted partitions whose removal a crash interrupted.
        for leftover in self.logs_dir.glob(f"{DELETED_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)
        self.catalog = Catalog(self.settings.resolved_catalog_url)
        self.clean_start = self.catalog.start(self.settings.node_id, now_ms())
        self._checkpoints = self.catalog.load_checkpoints()
        # Open the replicas this node had, before metadata arrives, so recovery runs once.
        if self.is_voter:
            self.mlog = self._metadata_log()
            self.controller = ControllerService(
                self.mlog,
                ControllerSettings(
                    session_timeout_ms=self.settings.session_timeout_ms,
                    election_timeout_ms=self.settings.election_timeout_ms,
                ),
                self.settings.controller_tick_ms,
            )
        self.agent = BrokerAgent(
            node_id=self.settings.node_id,
            url=self.settings.url,
            zone=self.settings.zone,
            clean=self.clean_start,
            controller=self.controller,
            voters=self.voters,
            peers=self.peers,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
            metadata_wait_ms=self.settings.metadata_wait_ms,
            leo_report=self._leo_report,
        )
        self.agent.add_listener(self._on_image)
        if self.mlog is not None:
            await self.mlog.start()
        await self.agent.start()
        # Serving HTTP must not wait for registration: in a cluster the controller may be
        # a peer that is itself starting. /readyz says when registration is done.
        self._tasks = [asyncio.create_task(self._finish_start())]

    async def _finish_start(self) -> None:
        assert self.agent is not None
        await self.agent.registered.wait()
        # Ready means this node's replicas are open for the metadata it registered at.
        await self.wait_reconciled(self.image.version, 300)
        self.replication.start()
        await self.subscriptions.start()
        self._tasks += [
            asyncio.create_task(self._every(self.settings.checkpoint_interval_ms, self.checkpoint)),
            asyncio.create_task(
                self._every(self.settings.retention_check_interval_ms, self.enforce_retention)
            ),
        ]
        if self.settings.fsync_policy == "interval":
            self._tasks += (
                asyncio.create_task(self._every(self.settings.fsync_interval_ms, self.flush)),
            )
        self.ready = True
        log.info(
            "node %s ready at %s (%s start, %d partitions, %s)",
            self.settings.node_id, self.settings.url,
            "clean" if self.clean_start else "unclean", len(self.partitions),
            "standalone" if self.standalone else ("voter" if self.is_voter else "observer"),
        )

    def _metadata_log(self) -> MetadataLog:
        assert self.catalog is not None
        if self.standalone:
            return LocalMetadataLog(self.catalog, self.settings.node_id)
        from app.cluster.raft_log import open_raft_log

        return open_raft_log(self.settings, self.voters)

    async def stop(self) -> None:
        self.ready = False
        # First, while the controller is reachable: commits the final cursors.
        await self.subscriptions.stop()
        if self.agent is not None:
            await self.agent.stop()
        if self.controller is not None:
            await self.controller.stop()
        await cancel_and_wait([self._reconcile_task])
        if self.mlog is not None:
            await self.mlog.stop()
        await cancel_and_wait(self._tasks)
        await self.replication.stop()
        for p in self.partitions.values():
            p.close_waiters()
        if self.settings.fsync_policy != "never":
            await self.flush()
        await self.checkpoint()
        for p in self.partitions.values():
            p.log.close()
        await self.peers.close()
        if self.catalog is not None:
            self.catalog.mark_clean_shutdown()
            self.catalog.close()

    def _leo_report(self) -> list[list[Any]]:
        """Per-partition LEOs for heartbeats (the controller elects the least-lagging)."""
        return [[t, p, r.log_end_offset] for (t, p), r in self.partitions.items()]

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
        """Save the HW and recovery point of partitions whose values moved since the last save."""
        saved = self._saved_checkpoints
        rows = [
            (t, p, hw, rp)
            for (t, p), r in self.partitions.items()
            if saved.get((t, p)) != (hw := r.high_watermark, rp := r.log.recovery_point)
        ]
        if rows and self.catalog is not None:
            await asyncio.to_thread(self.catalog.save_checkpoints, rows, now_ms())
            for t, p, hw, rp in rows:
                saved[(t, p)] = (hw, rp)

    async def enforce_retention(self) -> None:
        t = now_ms()
        for r in list(self.partitions.values()):
            if r.log.enforce_retention(t, r.high_watermark):
                self.metrics.retention_segments_deleted.inc()

    # ---- metadata → local replicas -------------------------------------------------------
    @property
    def image(self) -> MetadataImage:
        assert self.agent is not None
        return self.agent.image

    def _on_image(self, image: MetadataImage, previous: MetadataImage | None) -> None:
        """The agent applied metadata: reconcile local replicas with it (in a task)."""
        self._reconcile_wanted = True
        if self._reconcile_task is None or self._reconcile_task.done():
            self._reconcile_task = asyncio.get_running_loop().create_task(self._reconcile_loop())

    async def _reconcile_loop(self) -> None:
        """Drop deleted topics, open newly assigned replicas, refresh roles and epochs.

        Opening a log creates files and fsyncs its directory (milliseconds each),
        so new replicas are opened in a worker thread in chunks: a 1,000-partition
        topic must not stall the event loop, which also runs the raft timers.
        """
        while self._reconcile_wanted:
            self._reconcile_wanted = False
            image = self.image
            version = image.version
            gone = {t for (t, _p) in self.partitions if t not in image.topics}
            # A topic deleted and re-created while we were behind has a new id.
            for (t, _p), r in self.partitions.items():
                meta_t = image.topics.get(t)
                if meta_t is not None and meta_t.topic_id != r.topic_id:
                    gone.add(t)
            for name in gone:
                self._drop_topic(name)
            me = self.settings.node_id
            todo: list[tuple[TopicMeta, int]] = []
            events: list[dict[str, Any]] = []
            for topic in image.topics.values():
                for meta in topic.partitions:
                    replica = self.partitions.get((topic.name, meta.partition))
                    if replica is not None:
                        events += self._role_change_events(replica, meta)
                        self.replication.apply_meta(replica, meta, events)
                    elif me in meta.replicas:
                        todo.append((topic, meta.partition))
            for i in range(0, len(todo), 64):
                chunk = todo[i : i + 64]
                opened = await asyncio.to_thread(
                    lambda c=chunk: [self._open_replica(t, p) for t, p in c]  # type: ignore[misc]
                )
                for replica in opened:
                    current = self.image.topics.get(replica.topic)
                    if current is None or current.topic_id != replica.topic_id:
                        replica.log.close()  # deleted while we were opening it
                        self._reconcile_wanted = True
                        continue
                    events += self._role_change_events(replica, current.partitions[replica.partition])
                    self.partitions[(replica.topic, replica.partition)] = replica
                    self.replication.apply_meta(
                        replica, current.partitions[replica.partition], events
                    )
            self.replication.replan()
            self._confirm_leadership()
            if events and self.catalog is not None:
                await asyncio.to_thread(self.catalog.add_events, events)
            self._reconciled.advance(max(self._reconciled.value, version))

    def _role_change_events(self, replica: PartitionReplica, meta: PartitionMeta) -> list[dict[str, Any]]:
        """History rows for a leader change seen here (dashboard and API)."""
        old = replica.meta
        if old.leader_epoch == meta.leader_epoch and replica.opened_epoch_logged:
            return []
        replica.opened_epoch_logged = True
        me = self.settings.node_id
        role = "leader" if meta.leader == me else "follower" if me in meta.replicas else "none"
        reason = {
            "election": "elected; confirming leadership",
            "online": "leader confirmed",
            "offline": "no eligible leader",
        }.get(meta.status, meta.status)
        if meta.last_election_unclean:
            reason = "unclean election: data may be lost"
        return [{
            "ts_ms": now_ms(), "topic": meta.topic, "partition": meta.partition,
            "kind": "unclean_election" if meta.last_election_unclean else "leader_change",
            "leader_epoch": meta.leader_epoch, "reason": reason,
            "detail": {"leader": meta.leader, "isr": list(meta.isr), "role_here": role,
                       "partition_epoch": meta.partition_epoch, "status": meta.status},
        }]

    def _confirm_leadership(self) -> None:
        """Tell the controller we took up the leaderships it offered us (seed 002
        wait-for-response); it tries the next candidate if we do not in time.

        All pending confirmations go in one request, committed as one decision:
        a broker failure re-elects hundreds of partitions at once, and one raft
        commit per partition kept the controller busy for seconds.
        """
        me = self.settings.node_id
        new = [
            (t, p, r.meta.leader_epoch)
            for (t, p), r in self.partitions.items()
            if r.meta.leader == me and r.meta.status == "election"
            and (t, p, r.meta.leader_epoch) not in self._confirming
        ]
        if new:
            self._confirming.update(new)
            asyncio.get_running_loop().create_task(self._confirm(new))

    async def _confirm(self, keys: list[tuple[str, int, int]]) -> None:
        assert self.agent is not None
        try:
            for attempt in range(20):
                still = [
                    (t, p, e) for t, p, e in keys
                    if (m := self.image.partition(t, p)) is not None
                    and m.leader_epoch == e and m.status == "election"
                ]
                if not still:
                    return
                try:
                    await self.agent.call("confirm_leaderships", {
                        "broker_id": self.settings.node_id, "broker_epoch": self.broker_epoch,
                        "partitions": [list(k) for k in still],
                    })
                    return
                except Exception as e:  # retried: the controller may be failing over
                    log.info("confirming %d leaderships failed (%s), retrying", len(still), e)
                    await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
        finally:
            self._confirming.difference_update(keys)

    @property
    def reconciled_version(self) -> int:
        """The metadata version local replicas reflect (-1 before the first)."""
        return self._reconciled.value

    async def wait_reconciled(self, version: int, timeout_s: float) -> bool:
        """Wait until local replicas reflect metadata ``version``."""
        return await self._reconciled.wait_for(version, timeout_s)

    async def controller_call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        """Run an admin command on the active controller and wait until this node has
        applied its result, so the caller reads its own write."""
        assert self.agent is not None
        out = await self.agent.call(op, body)
        version = int(out.get("version", 0))
        if not (
            await self.agent.wait_for_version(version, 30)
            and await self.wait_reconciled(version, 30)
        ):
            raise ApiError(
                "TIMEOUT", f"committed at metadata version {version} but not applied here yet"
            )
        return out

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
            topic.name, topic.topic_id, meta, topic.config, plog, self.settings.node_id, hw,
            self.replication.settings,
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
            self._saved_checkpoints.pop(key, None)
        if self.catalog is not None:
            self.catalog.drop_checkpoints(name)
        self._sticky.pop(name, None)

    # ---- lookups used by the API ---------------------------------------------------------
    def topic(self, name: str) -> TopicMeta:
        t = self.image.topics.get(name)
        if t is None:
            raise ApiError("TOPIC_NOT_FOUND", f"topic {name!r} does not exist")
        return t

    def leads(self, topic: str, partition: int) -> bool:
        """Whether this broker is the partition's leader (per its metadata); False if unknown."""
        r = self.partitions.get((topic, partition))
        if r is not None:
            return r.is_leader
        self.topic(topic)  # TOPIC_NOT_FOUND before anything else
        return False

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
