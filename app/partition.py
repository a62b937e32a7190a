"""A partition replica on this broker: its log, its protocol state, its waiters.

Glue between storage (``PartitionLog``), the sans-I/O protocol core
(``LeaderState``) and asyncio (``OffsetWaiters``). It holds no HTTP concern.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from app.errors import ApiError
from app.purgatory import OffsetWaiters
from app.records import ProducedRecord, render_records
from app.storage import LogConfig, PartitionLog, iter_records
from replication.controller.image import NO_LEADER, PartitionMeta, TopicConfig
from replication.core import (
    NO_LEADER as CORE_NO_LEADER,
)
from replication.core import (
    Action,
    FollowerState,
    HighWatermarkAdvanced,
    LeaderState,
    ReplicationSettings,
)

# Reads up to this size run inline; larger ones go to a worker thread so the
# event loop keeps serving while pages are read from disk.
INLINE_READ_BYTES = 256 * 1024
# Committed reads on a new leader wait at least this long for its HW to reach LESO.
HW_UNKNOWN_WAIT_MS = 2000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def log_config(cfg: TopicConfig, index_interval_bytes: int) -> LogConfig:
    return LogConfig(
        segment_bytes=cfg.segment_bytes,
        segment_ms=cfg.segment_ms,
        retention_ms=cfg.retention_ms,
        retention_bytes=cfg.retention_bytes,
        index_interval_bytes=index_interval_bytes,
    )


class PartitionGone(Exception):
    """The partition was deleted or this broker stopped leading it while a request waited."""


@dataclass(slots=True)
class FetchResult:
    records: list[memoryview]
    """Comma-separated runs of served record JSON (one per batch); see slice_records."""
    count: int
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int

    def to_json(self) -> bytes:
        return b'{"records":[%b],"next_offset":%d,"high_watermark":%d,"log_start_offset":%d,"log_end_offset":%d}' % (
            b",".join(self.records),
            self.next_offset,
            self.high_watermark,
            self.log_start_offset,
            self.log_end_offset,
        )


class PartitionReplica:
    """This broker's replica of one partition: leader, follower, or neither.

    The role follows the controller's metadata (:meth:`update_meta`): a newer
    leader epoch naming this broker makes it ``become_leader`` (LESO = LEO,
    seed 001 §6.4.2); one naming another broker ``become_follower``. Exactly one
    of ``leader_state``/``follower_state`` is set while this broker is a replica.
    """

    def __init__(
        self,
        topic: str,
        topic_id: str,
        meta: PartitionMeta,
        config: TopicConfig,
        log: PartitionLog,
        local_broker: int,
        high_watermark: int,
        settings: ReplicationSettings | None = None,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = meta.partition
        self.config = config
        self.log = log
        self.local_broker = local_broker
        self.meta = meta
        self.settings = settings or ReplicationSettings()
        self.broker_epoch = -1
        leo = log.log_end_offset
        self._hw = max(log.log_start_offset, min(high_watermark, leo))
        self.leader_state: LeaderState | None = None
        self.follower_state: FollowerState | None = None
        self.hw_waiters = OffsetWaiters()
        self.hw_waiters.value = self._hw
        self.leo_waiters = OffsetWaiters()
        self.leo_waiters.value = leo
        self.fetch_watchers: set[asyncio.Event] = set()
        """Parked replica fetches (leader side): set on append, HW move and role change."""
        self.last_append_ms = -1
        self.avg_record_bytes = 256
        self.opened_epoch_logged = False

    # ---- roles ---------------------------------------------------------------------------
    def update_meta(self, meta: PartitionMeta, now: int | None = None) -> list[Action]:
        """New controller metadata for this partition (roles, epochs, ISR).

        Returns the protocol actions the driver must carry out (AlterPartition
        answers may be superseded here, HW may move, a follower may truncate).
        Metadata never goes backwards (the agent refuses older images), so an
        older leader epoch than the current role's is ignored.
        """
        t = now_ms() if now is None else now
        self.meta = meta
        me = self.local_broker
        if meta.leader == me:
            ls = self.leader_state
            if ls is None or meta.leader_epoch > ls.leader_epoch:
                return self._become_leader(meta, t)
            if meta.leader_epoch < ls.leader_epoch:
                return []
            return ls.on_metadata(
                isr=tuple(meta.isr), partition_epoch=meta.partition_epoch,
                assignment=tuple(meta.replicas),
                min_insync_replicas=self.config.min_insync_replicas,
            )
        fs = self.follower_state
        leader = meta.leader if meta.leader != NO_LEADER else CORE_NO_LEADER
        if fs is None or meta.leader_epoch > fs.leader_epoch or fs.leader != leader:
            if self.leader_state is not None and meta.leader_epoch < self.leader_state.leader_epoch:
                return []
            return self._become_follower(meta, leader, t)
        fs.on_metadata(partition_epoch=meta.partition_epoch)
        return []

    def _become_leader(self, meta: PartitionMeta, now: int) -> list[Action]:
        """Seed 001 §6.4.2: LESO = LEO; the local HW may be stale (§6.4.1)."""
        hw = self.high_watermark
        isr = tuple(meta.isr) if self.local_broker in meta.isr else (self.local_broker,)
        replicas = tuple(meta.replicas) if self.local_broker in meta.replicas else isr
        self.follower_state = None
        self.leader_state = LeaderState.become_leader(
            local_broker=self.local_broker, leader_epoch=meta.leader_epoch,
            partition_epoch=meta.partition_epoch, isr=isr, assignment=replicas,
            min_insync_replicas=self.config.min_insync_replicas, log=self.log,
            high_watermark=hw, now_ms=now, settings=self.settings,
        )
        self.hw_waiters.reset(self.leader_state.high_watermark)
        self._wake_fetches()
        actions: list[Action] = []
        if self.leader_state.on_local_append(self.log.log_end_offset):  # RF=1: HW = LEO now
            actions.append(HighWatermarkAdvanced(self.leader_state.high_watermark))
        return actions

    def _become_follower(self, meta: PartitionMeta, leader: int, now: int) -> list[Action]:
        """Follow ``leader`` (or wait for one). Nothing is truncated here: the first
        fetch of the new epoch finds the divergence point (KIP-101, seed 001 §6.6)."""
        was_leader = self.leader_state is not None
        hw = self.high_watermark
        self.leader_state = None
        if was_leader:
            # Deposed: acks=all waiters and public long-polls cannot finish here.
            self.close_waiters()
            self._wake_fetches()
        self.follower_state, actions = FollowerState.become_follower(
            local_broker=self.local_broker, leader=leader, leader_epoch=meta.leader_epoch,
            partition_epoch=meta.partition_epoch, broker_epoch=self.broker_epoch,
            log=self.log, high_watermark=hw, now_ms=now, settings=self.settings,
        )
        self.hw_waiters.reset(self.follower_state.high_watermark)
        return actions

    def _wake_fetches(self) -> None:
        for ev in self.fetch_watchers:
            ev.set()

    def on_hw_advanced(self) -> None:
        """The leader's HW moved: wake acks=all waiters and parked replica fetches."""
        if self.leader_state is not None:
            self.hw_waiters.advance(self.leader_state.high_watermark)
            self._wake_fetches()

    # ---- follower data path ---------------------------------------------------------------
    def truncate(self, offset: int) -> None:
        """Follower: drop ``offset`` onwards (a ``Truncate`` action), then re-derive the HW."""
        assert self.leader_state is None, "a leader's log never shrinks"
        self.log.truncate_to(offset)
        self._after_log_change()

    def append_fetched(self, data: bytes | memoryview) -> None:
        """Follower: append the leader's batch bytes unchanged (an ``AppendFetched`` action)."""
        assert self.leader_state is None
        if data:
            self.log.append_batches(data, now_ms())
        self._after_log_change()

    def _after_log_change(self) -> None:
        leo = self.log.log_end_offset
        if self.follower_state is not None:
            self.follower_state.on_log_changed(self.log)
        if leo < self.leo_waiters.value:
            self.leo_waiters.reset(leo)
        else:
            self.leo_waiters.advance(leo)
        hw = self.high_watermark
        if hw < self.hw_waiters.value:
            self.hw_waiters.reset(hw)
        else:
            self.hw_waiters.advance(hw)

    def adopt_leader_hw(self) -> None:
        """After a fetch answer without records: the follower's HW may still have moved."""
        self._after_log_change()

    @property
    def is_leader(self) -> bool:
        return self.meta.leader == self.local_broker and self.leader_state is not None

    @property
    def leader(self) -> LeaderState:
        """The leader state; NOT_LEADER when this broker does not lead the partition."""
        if self.leader_state is None:
            raise ApiError("NOT_LEADER", f"{self.topic}/{self.partition} is not led by this node")
        return self.leader_state

    def isr_size(self) -> int:
        return len(self.leader_state.isr) if self.leader_state else len(self.meta.isr)

    # ---- state ---------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        """Raw local HW: the leader's, or the follower's (leader HW capped at LEO)."""
        if self.leader_state is not None:
            return self.leader_state.high_watermark
        if self.follower_state is not None:
            return self.follower_state.high_watermark
        return self._hw

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # ---- produce -------------------------------------------------------------------------
    def append(self, records: Sequence[ProducedRecord]) -> tuple[int, int]:
        """Append one batch as leader; returns ``(base_offset, last_offset)``.

        NOT_LEADER when this broker does not lead the partition (any more).
        """
        leader = self.leader
        t = now_ms()
        base, last = self.log.append_records(records, leader.leader_epoch, t)
        self.last_append_ms = t
        # Stored size per record (body + key + 20 B framing + batch header share); sizes reads.
        n = len(records)
        # Served JSON (body + ~60 B of offset/timestamp/epoch) + 12 B table entry.
        stored = sum(len(r.body) for r in records) + 72 * n + 61
        self.avg_record_bytes = max(32, (self.avg_record_bytes * 3 + stored // n) // 4)
        leo = last + 1
        self.leo_waiters.advance(leo)
        if leader.on_local_append(leo):
            self.hw_waiters.advance(leader.high_watermark)
        self._wake_fetches()
        return base, last

    async def wait_committed(self, last_offset: int, timeout_s: float) -> bool:
        """acks=all: wait until the HW passes ``last_offset``."""
        return await self.hw_waiters.wait_for(last_offset + 1, timeout_s)

    # ---- fetch ---------------------------------------------------------------------------
    def visible_end(self, committed: bool) -> int:
        return self.high_watermark if committed else self.log_end_offset

    def check_offset(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise ApiError(
                "OFFSET_OUT_OF_RANGE",
                f"offset {offset} is outside [{self.log_start_offset}, {self.log_end_offset}]",
                log_start_offset=self.log_start_offset,
                high_watermark=self.high_watermark,
                log_end_offset=self.log_end_offset,
            )

    async def wait_hw_known(self, max_wait_ms: int) -> None:
        """Committed reads on a new leader wait until its HW reaches LESO.

        Seed 001 §6.4.1/§6.4.2: a new leader's local HW may lag the HW the
        old leader already showed; serving it would make the HW consumers see
        go backwards. Until the applied HW is known, wait (at least a short
        while), then answer 503 UNAVAILABLE, which clients retry.
        """
        ls = self.leader_state
        if ls is None or ls.applied_high_watermark is not None:
            return
        await self.hw_waiters.wait_for(
            ls.leader_epoch_start_offset, max(max_wait_ms, HW_UNKNOWN_WAIT_MS) / 1000
        )
        ls = self.leader_state
        if ls is not None and ls.applied_high_watermark is None:
            raise ApiError(
                "UNAVAILABLE",
                f"{self.topic}/{self.partition}: new leader, high watermark not yet known; retry",
            )

    async def fetch(
        self,
        offset: int,
        max_records: int,
        max_bytes: int,
        max_wait_ms: int,
        committed: bool,
    ) -> FetchResult:
        self.check_offset(offset)
        if committed:
            await self.wait_hw_known(max_wait_ms)
        waiters = self.hw_waiters if committed else self.leo_waiters
        if self.visible_end(committed) <= offset and max_wait_ms > 0:
            await waiters.wait_for(offset + 1, max_wait_ms / 1000)
            self.check_offset(offset)  # retention or truncation may have moved the range
        upto = self.visible_end(committed)
        chunks: list[memoryview] = []
        count = 0
        nxt = offset
        if offset < upto:
            first_read = min(max_bytes, max_records * self.avg_record_bytes) + 4096
            if first_read <= INLINE_READ_BYTES:
                chunks, count, nxt = self._read(offset, upto, max_records, max_bytes)
            else:
                chunks, count, nxt = await asyncio.to_thread(
                    self._read, offset, upto, max_records, max_bytes
                )
        return FetchResult(
            chunks, count, nxt, self.high_watermark, self.log_start_offset, self.log_end_offset
        )

    async def read_events(
        self, offset: int, max_records: int, max_wait_ms: int, committed: bool
    ) -> list[tuple[int, memoryview]]:
        """``(offset, record_json)`` pairs from ``offset`` for Server-Sent Events.

        Waits like :meth:`fetch`; returns ``[]`` when nothing arrived in time.
        """
        self.check_offset(offset)
        waiters = self.hw_waiters if committed else self.leo_waiters
        if self.visible_end(committed) <= offset and max_wait_ms > 0:
            await waiters.wait_for(offset + 1, max_wait_ms / 1000)
            self.check_offset(offset)
        upto = self.visible_end(committed)
        if offset >= upto:
            return []
        while True:
            gen = self.log.generation
            data = self.log.read(offset, max_records * self.avg_record_bytes + 4096, upto)
            if gen == self.log.generation:
                break
            self.check_offset(offset)
        out: list[tuple[int, memoryview]] = []
        for off, _ts, _epoch, rec in iter_records(data):
            if off >= upto or len(out) >= max_records:
                break
            if off >= offset:
                out.append((off, rec))
        return out

    def _read(
        self, offset: int, upto: int, max_records: int, max_bytes: int
    ) -> tuple[list[memoryview], int, int]:
        """Up to ``max_records`` / ``max_bytes`` of served JSON from ``offset``.

        Reads are sized from the average stored record so a small
        ``max_records`` with a large ``max_bytes`` does not read megabytes it
        will not serve; a short read is topped up by further reads.
        """
        out: list[memoryview] = []
        count = size = 0
        nxt = offset
        while nxt < upto and count < max_records and size < max_bytes:
            gen = self.log.generation
            want = min(max_bytes - size, (max_records - count) * self.avg_record_bytes) + 4096
            data = self.log.read(nxt, want, upto)
            if gen != self.log.generation:
                # A truncation or retention ran during the read: start again on the new log.
                self.check_offset(offset)
                out, count, size, nxt = [], 0, 0, offset
                continue
            chunks, n, nxt2, nbytes = render_records(
                data, nxt, upto, max_records - count, max_bytes - size, min_one=not out
            )
            if not chunks:
                break
            out += chunks
            count += n
            size += nbytes
            nxt = nxt2
        return out, count, nxt

    def close_waiters(self) -> None:
        exc = PartitionGone(f"{self.topic}/{self.partition} is no longer served here")
        self.hw_waiters.fail_all(exc)
        self.leo_waiters.fail_all(exc)
        self._wake_fetches()
