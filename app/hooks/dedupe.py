"""Delivery ids seen by a partition leader, so a replayed webhook is stored once.

Senders retry (Stripe for days, GitHub on a manual "redeliver"), and a retry
after a lost response must not become a second record. The leader of the
partition a delivery hashes to decides: the key defaults to the delivery id,
so every replay of one delivery reaches the same partition, hence the same
leader. Checking the ledger and appending happen with no ``await`` between
them, so two concurrent copies of one delivery cannot both be appended.

The ledger is memory, rebuilt from the log itself whenever this broker
starts leading the partition in a new leader epoch: every stored delivery
carries its id in the ``tidelog-delivery-id`` header, so records from the
window (found with the time index) restore it. That makes dedupe survive
restarts and leader changes without another store, within two limits that the
README states: records removed by retention are forgotten, and at most
``max_entries`` ids per partition are remembered (the oldest go first).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterator

import orjson

from app.errors import ApiError
from app.hooks.ingest import DELIVERY_HEADER
from app.storage.batch import iter_records
from app.storage.log import PartitionLog

_NEEDLE = b'"' + DELIVERY_HEADER.encode() + b'"'
SCAN_READ_BYTES = 1 << 20


def scan_delivery_ids(log: PartitionLog, since_ms: int, upto: int) -> Iterator[tuple[str, int, int]]:
    """``(delivery_id, offset, timestamp_ms)`` of records in ``[first at since_ms, upto)``.

    Blocking (reads files): run it in a worker thread. Only records whose
    served JSON mentions the header are decoded.
    """
    start = log.offset_for_timestamp(since_ms)
    if start is None:
        return
    off = max(start, log.log_start_offset)
    while off < upto:
        data = log.read(off, SCAN_READ_BYTES, upto)
        if not data:
            return
        last = off - 1
        any_hook = _NEEDLE in data  # most chunks of a busy non-hook topic decode nothing
        for o, ts, _epoch, rec in iter_records(data):
            if o >= upto:
                return
            last = o
            if o < off or not any_hook:
                continue
            raw = bytes(rec)
            if _NEEDLE not in raw:
                continue
            headers = orjson.loads(raw).get("headers") or {}
            did = headers.get(DELIVERY_HEADER)
            if isinstance(did, str):
                yield did, o, ts
        if last < off:
            return
        off = last + 1


class PartitionLedger:
    """Delivery id → (offset, first seen ms), oldest first, for one leader epoch."""

    def __init__(self, leader_epoch: int, max_entries: int) -> None:
        self.leader_epoch = leader_epoch
        self.max_entries = max_entries
        self._seen: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self.ready = asyncio.Event()

    def __len__(self) -> int:
        return len(self._seen)

    def lookup(self, delivery_id: str, now_ms: int, window_ms: int) -> int | None:
        """The offset the delivery was stored at, or ``None`` if not seen within the window."""
        self._expire(now_ms - window_ms)
        hit = self._seen.get(delivery_id)
        return None if hit is None else hit[0]

    def remember(self, delivery_id: str, offset: int, at_ms: int) -> None:
        if delivery_id in self._seen:
            return  # the first copy's offset is the answer for every replay
        self._seen[delivery_id] = (offset, at_ms)
        while len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)

    def _expire(self, before_ms: int) -> None:
        seen = self._seen
        while seen:
            _, (_, at) = next(iter(seen.items()))
            if at >= before_ms:
                return
            seen.popitem(last=False)


class HookLedgers:
    """One ledger per led partition; a new leader epoch starts a rebuilt ledger."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._ledgers: dict[tuple[str, int], PartitionLedger] = {}

    async def ledger(
        self, topic: str, partition: int, log: PartitionLog, leader_epoch: int, now_ms: int, window_ms: int
    ) -> PartitionLedger:
        """The ledger for this leader epoch, rebuilt from the log on first use (in a thread)."""
        key = (topic, partition)
        led = self._ledgers.get(key)
        if led is None or led.leader_epoch != leader_epoch:
            led = PartitionLedger(leader_epoch, self.max_entries)
            self._ledgers[key] = led
            upto = log.log_end_offset
            try:
                found = await asyncio.to_thread(
                    lambda: list(scan_delivery_ids(log, now_ms - window_ms, upto))
                )
                for did, off, ts in found:
                    led.remember(did, off, ts)
            except BaseException:
                self._ledgers.pop(key, None)  # the next delivery tries the rebuild again
                led.ready.set()
                raise
            led.ready.set()
        else:
            await led.ready.wait()
            if self._ledgers.get(key) is not led:
                raise ApiError("UNAVAILABLE", f"{topic}/{partition}: delivery ledger rebuild failed; retry",
                               status=503)
        return led

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._ledgers if k[0] == topic]:
            del self._ledgers[key]
