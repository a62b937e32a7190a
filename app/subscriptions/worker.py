"""Delivery of one partition to one subscriber, run by the partition's leader.

Loop: read committed records (below the HW, the same read a fetch with
``isolation=committed`` does) from the cursor, POST them as one batch, and
move the cursor past them only after a 2xx or after they were written to
the dead-letter topic. So every committed record is delivered at least once
and in offset order; a batch is never sent before the previous one
succeeded or was dead-lettered.

The cursor lives in memory and is committed to cluster metadata by the
manager every ``webhook_cursor_commit_ms`` (and when the worker stops). A
new leader starts from the last committed cursor, so the records delivered
after that commit are delivered again: at most one commit interval of
deliveries plus the batch in flight. Receivers dedupe with the offsets (or
``Tidelog-Delivery-Id = <subscription>:<partition>:<first offset>``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from app.errors import ApiError
from app.partition import FetchResult, PartitionGone, PartitionReplica, now_ms
from app.subscriptions.model import PartitionState
from app.subscriptions.sender import Outcome, Sender
from app.subscriptions.signing import SIGNATURE_HEADER, sign

log = logging.getLogger("tidelog.subscriptions")

POLL_WAIT_MS = 5_000
"""Long-poll on the HW while caught up; a role change wakes it at once."""
DLQ_RETRY_MS_MAX = 5_000
STOP_GRACE_S = 5.0
USER_AGENT = "tidelog-webhook/1"

DeadLetterWriter = Callable[[str, list[dict[str, Any]]], Awaitable[None]]
"""(dead-letter topic, produce records) → written with acks=all, or raises."""


@dataclass(frozen=True, slots=True)
class Batch:
    first_offset: int
    next_offset: int
    count: int
    records_json: bytes
    """Comma-separated served record objects (the fetch API's JSON, not re-encoded)."""


def backoff_s(attempt: int, base_ms: int, cap_ms: int, rng: random.Random) -> float:
    """Full jitter (uniform in [0, min(cap, base * 2^(attempt-1))]): retries of many
    partitions against one recovering receiver spread out instead of arriving in waves."""
    ceiling = min(cap_ms, base_ms * 2 ** min(attempt - 1, 30))
    return rng.uniform(0, ceiling) / 1000


class PartitionWorker:
    def __init__(
        self,
        *,
        sub_id: str,
        cfg: dict[str, Any],
        replica: PartitionReplica,
        leader_epoch: int,
        state: PartitionState,
        sender: Sender,
        mark_dirty: Callable[[PartitionState], None],
        commit_now: Callable[[PartitionState], Awaitable[None]],
        dead_letter: DeadLetterWriter,
        rng: random.Random | None = None,
    ) -> None:
        self.sub_id = sub_id
        self.cfg = cfg
        self.replica = replica
        self.leader_epoch = leader_epoch
        self.state = state
        self.sender = sender
        self.mark_dirty = mark_dirty
        self.commit_now = commit_now
        self.dead_letter = dead_letter
        self.rng = rng or random.Random()

    def leading(self) -> bool:
        r = self.replica
        return r.is_leader and r.meta.leader_epoch == self.leader_epoch

    async def run(self) -> None:
        """Deliver until cancelled or this broker stops leading the partition."""
        failures = 0
        while self.leading():
            try:
                if self.state.cursor < 0:
                    cursor = await self._resolve_start()
                    if not self.leading():
                        return
                    self.state.cursor = cursor
                    # Durable before anything is delivered: a failover must not re-resolve
                    # "latest" to a later offset and skip what was produced in between.
                    try:
                        await self.commit_now(self.state)
                    except BaseException:
                        self.state.cursor = -1
                        raise
                batch = await self._next_batch()
                if batch is not None:
                    if not await self._deliver(batch):
                        return
                    self.state.cursor = batch.next_offset
                    self.mark_dirty(self.state)
                failures = 0
            except PartitionGone:
                return
            except Exception as e:  # a bug or an unavailable controller: retry, do not spin
                failures += 1
                log.exception("subscription %s %s/%s: delivery loop failed", self.sub_id,
                              self.replica.topic, self.replica.partition)
                self.state.last_error = f"internal: {type(e).__name__}: {e}"[:500]
                self.state.last_error_ms = now_ms()
                await asyncio.sleep(backoff_s(failures, 200, DLQ_RETRY_MS_MAX, self.rng))

    # ---- reading ---------------------------------------------------------------------------
    async def _resolve_start(self) -> int:
        r = self.replica
        while True:
            try:
                await r.wait_hw_known(POLL_WAIT_MS)
                break
            except ApiError:
                if not self.leading():
                    raise PartitionGone("not leading") from None
        start = self.cfg.get("start", "latest")
        if start == "earliest":
            return r.log_start_offset
        if start == "latest":
            return r.high_watermark
        return max(r.log_start_offset, min(int(start), r.high_watermark))

    async def _next_batch(self) -> Batch | None:
        r, st = self.replica, self.state
        try:
            res: FetchResult = await r.fetch(
                st.cursor, int(self.cfg["batch_size"]), int(self.cfg["max_batch_bytes"]),
                POLL_WAIT_MS, committed=True,
            )
        except ApiError as e:
            if e.code == "OFFSET_OUT_OF_RANGE":
                self._cursor_out_of_range()
            elif e.code == "UNAVAILABLE":  # new leader, HW not known yet
                pass
            else:
                raise
            return None
        if res.high_watermark != st.high_watermark:
            st.high_watermark = res.high_watermark
            self.mark_dirty(st)
        if res.count == 0:
            return None
        return Batch(st.cursor, res.next_offset, res.count, b",".join(res.records))

    def _cursor_out_of_range(self) -> None:
        """Retention removed undelivered records, or an unclean election truncated the log."""
        r, st = self.replica, self.state
        if st.cursor < r.log_start_offset:
            lost = r.log_start_offset - st.cursor
            st.skipped += lost
            st.last_error = f"{lost} records removed by retention before delivery (offsets {st.cursor}.." \
                f"{r.log_start_offset - 1}); skipped"
            st.cursor = r.log_start_offset
        else:
            st.last_error = f"cursor {st.cursor} is past the log end {r.log_end_offset} " \
                f"(log truncated by an unclean election); resuming at the high watermark"
            st.cursor = r.high_watermark
        st.last_error_ms = now_ms()
        log.warning("subscription %s %s/%s: %s", self.sub_id, r.topic, r.partition, st.last_error)
        self.mark_dirty(st)

    # ---- sending ---------------------------------------------------------------------------
    def _body(self, b: Batch) -> bytes:
        r = self.replica
        dumps = orjson.dumps
        return b'{"subscription":%b,"topic":%b,"partition":%d,"delivery_id":%b,' \
            b'"first_offset":%d,"last_offset":%d,"records":[%b]}' % (
                dumps(self.sub_id), dumps(r.topic), r.partition, dumps(self._delivery_id(b)),
                b.first_offset, b.next_offset - 1, b.records_json,
            )

    def _delivery_id(self, b: Batch) -> str:
        return f"{self.sub_id}:{self.replica.partition}:{b.first_offset}"

    def _headers(self, b: Batch, body: bytes, attempt: int) -> dict[str, str]:
        h = {
            **self.cfg.get("headers", {}),
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Tidelog-Delivery-Id": self._delivery_id(b),
            "Tidelog-Subscription": self.sub_id,
            "Tidelog-Topic": self.replica.topic,
            "Tidelog-Partition": str(self.replica.partition),
            "Tidelog-First-Offset": str(b.first_offset),
            "Tidelog-Last-Offset": str(b.next_offset - 1),
            "Tidelog-Attempt": str(attempt),
            "Tidelog-Broker": str(self.replica.local_broker),
        }
        secret = self.cfg.get("secret")
        if secret:
            h[SIGNATURE_HEADER] = sign(secret, body, int(time.time()))
        return h

    async def _deliver(self, b: Batch) -> bool:
        """Send until a 2xx or dead-lettered (True), or leadership is lost (False)."""
        cfg = self.cfg
        body = self._body(b)
        first_attempt = time.monotonic()
        max_age_s = int(cfg["max_age_ms"]) / 1000
        attempt = 0
        while True:
            attempt += 1
            out = await self._post_finishing_on_stop(b, body, attempt)
            if out.ok:
                return True
            self._failed(out, attempt)
            age_s = time.monotonic() - first_attempt
            if attempt >= int(cfg["max_attempts"]) or age_s >= max_age_s:
                return await self._dead_letter(b, out, attempt)
            delay = backoff_s(attempt, int(cfg["retry_backoff_ms"]), int(cfg["retry_backoff_max_ms"]), self.rng)
            await asyncio.sleep(min(delay, max(0.0, max_age_s - age_s)))
            if not self.leading():
                return False

    async def _post_finishing_on_stop(self, b: Batch, body: bytes, attempt: int) -> Outcome:
        """One attempt. A stop (pause, leadership change, shutdown) that arrives while the
        request is in flight waits up to ``STOP_GRACE_S`` for its answer instead of dropping
        it: a dropped 2xx would make the next leader deliver the batch again."""
        timeout_s = int(self.cfg["timeout_ms"]) / 1000
        fut = asyncio.ensure_future(
            self.sender.post(str(self.cfg["url"]), body, self._headers(b, body, attempt), timeout_s)
        )
        try:
            out = await asyncio.shield(fut)
        except asyncio.CancelledError:
            try:
                out = await asyncio.wait_for(fut, min(timeout_s, STOP_GRACE_S))
            except (TimeoutError, asyncio.CancelledError):
                fut.cancel()
                raise asyncio.CancelledError from None
            self._accounted(b, out)
            if out.ok:
                self.state.cursor = b.next_offset
                self.mark_dirty(self.state)
            raise
        self._accounted(b, out)
        return out

    def _accounted(self, b: Batch, out: Outcome) -> None:
        st = self.state
        st.requests += 1
        if out.ok:
            st.delivered += b.count
            st.last_success_ms = now_ms()
            st.attempts = 0

    def _failed(self, out: Outcome, attempt: int) -> None:
        st = self.state
        st.failures += 1
        st.attempts = attempt
        st.last_error = out.error
        st.last_error_ms = now_ms()
        self.mark_dirty(st)

    async def _dead_letter(self, b: Batch, out: Outcome, attempts: int) -> bool:
        """Write the batch's records to the dead-letter topic (retrying until it works)."""
        r, st = self.replica, self.state
        records = []
        for rec in orjson.loads(b"[" + b.records_json + b"]"):
            headers = dict(rec.get("headers") or {})
            headers.update({
                "tidelog-dlq-subscription": self.sub_id,
                "tidelog-dlq-topic": r.topic,
                "tidelog-dlq-partition": str(r.partition),
                "tidelog-dlq-offset": str(rec["offset"]),
                "tidelog-dlq-error": (out.error or "")[:500],
                "tidelog-dlq-attempts": str(attempts),
            })
            records.append({"key": rec.get("key"), "value": rec.get("value"), "headers": headers,
                            "timestamp": rec.get("timestamp")})
        topic = str(self.cfg["dead_letter_topic"])
        tries = 0
        while True:
            try:
                await self.dead_letter(topic, records)
                break
            except Exception as e:  # retried: the DLQ partition may be electing a leader
                tries += 1
                st.last_error = f"dead-lettering to {topic!r} failed: {e}"[:500]
                st.last_error_ms = now_ms()
                self.mark_dirty(st)
                await asyncio.sleep(backoff_s(tries, 100, DLQ_RETRY_MS_MAX, self.rng))
                if not self.leading():
                    return False
        st.dead_lettered += b.count
        st.attempts = 0
        self.mark_dirty(st)
        log.info("subscription %s %s/%s: offsets %d..%d dead-lettered to %s after %d attempts (%s)",
                 self.sub_id, r.topic, r.partition, b.first_offset, b.next_offset - 1, topic,
                 attempts, out.error)
        return True
