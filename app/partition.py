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
from replication.controller.image import PartitionMeta, TopicConfig
from replication.core.partition import LeaderState

# Reads up to this size run inline; larger ones go to a worker thread so the
# event loop keeps serving while pages are read from disk.
INLINE_READ_BYTES = 256 * 1024


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
    """This broker's replica of one partition (single-node: always the leader)."""

    def __init__(
        self,
        topic: str,
        topic_id: str,
        meta: PartitionMeta,
        config: TopicConfig,
        log: PartitionLog,
        local_broker: int,
        high_watermark: int,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = meta.partition
        self.config = config
        self.log = log
        self.local_broker = local_broker
        self.meta = meta
        leo = log.log_end_offset
        hw = max(log.log_start_offset, min(high_watermark, leo))
        self.leader = LeaderState(
            local_broker=local_broker,
            leader_epoch=meta.leader_epoch,
            isr=tuple(meta.isr) if local_broker in meta.isr else (local_broker,),
            min_insync_replicas=config.min_insync_replicas,
            high_watermark=hw,
            log_end_offset=leo,
            leader_epoch_start_offset=leo,
        )
        self.leader._advance_hw()
        self.hw_waiters = OffsetWaiters()
        self.hw_waiters.value = self.leader.high_watermark
        self.leo_waiters = OffsetWaiters()
        self.leo_waiters.value = leo
        self.last_append_ms = -1
        self.avg_record_bytes = 256
        self.opened_epoch_logged = False

    def update_meta(self, meta: PartitionMeta) -> None:
        """New controller metadata for this partition (roles, epochs, ISR).

        The data path of followers arrives with replication; until then a
        replica only serves while this broker is the partition's leader.
        """
        self.meta = meta
        if meta.leader == self.local_broker:
            self.leader.leader_epoch = meta.leader_epoch
            if self.local_broker in meta.isr:
                self.leader.isr = tuple(meta.isr)

    @property
    def is_leader(self) -> bool:
        return self.meta.leader == self.local_broker

    # ---- state ---------------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self.leader.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    # ---- produce -------------------------------------------------------------------------
    def append(self, records: Sequence[ProducedRecord]) -> tuple[int, int]:
        """Append one batch as leader; returns ``(base_offset, last_offset)``."""
        t = now_ms()
        base, last = self.log.append_records(
            records, self.leader.leader_epoch, t
        )
        self.last_append_ms = t
        # Stored size per record (body + key + 20 B framing + batch header share); sizes reads.
        n = len(records)
        # Served JSON (body + ~60 B of offset/timestamp/epoch) + 12 B table entry.
        stored = sum(len(r.body) for r in records) + 72 * n + 61
        self.avg_record_bytes = max(32, (self.avg_record_bytes * 3 + stored // n) // 4)
        leo = last + 1
        self.leo_waiters.advance(leo)
        if self.leader.on_local_append(leo):
            self.hw_waiters.advance(self.leader.high_watermark)
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

    async def fetch(
        self,
        offset: int,
        max_records: int,
        max_bytes: int,
        max_wait_ms: int,
        committed: bool,
    ) -> FetchResult:
        self.check_offset(offset)
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
