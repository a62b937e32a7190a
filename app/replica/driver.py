"""Executes the protocol core's actions and drives its clock (ARCHITECTURE.md layer 3).

* ``SendAlterPartition`` → ``agent.call("alter_partitions")``, every pending
  change of this leader in one request and one controller decision; each answer goes
  back through ``LeaderState.on_alter_partition_result`` (seed 001 §6.3 rule 4,
  §6.5.2); committed changes are written to the catalog history with reasons.
* ``ReportLeaderSuspect`` → ``agent.call("leader_suspect")`` (seed 000
  "Partition Leader Failure").
* ``HighWatermarkAdvanced`` → wake acks=all waiters and parked fetches.
* ``Truncate``/``AppendFetched`` → the follower's log.
* A tick loop runs ``LeaderState.tick`` (ISR shrink by lag time/records) and
  ``FollowerState.tick`` (suspicion) for every replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from app.errors import ApiError
from app.partition import PartitionReplica, now_ms
from app.replica.fetcher import ReplicaFetcher
from app.tasks import cancel_and_wait
from replication.controller.errors import ControllerError
from replication.controller.image import PartitionMeta
from replication.core import (
    Action,
    AppendFetched,
    HighWatermarkAdvanced,
    LeaderState,
    ReplicationSettings,
    ReportLeaderSuspect,
    SendAlterPartition,
    Truncate,
)

if TYPE_CHECKING:
    from app.node import Node

log = logging.getLogger("tidelog.replication")


class ReplicationDriver:
    """One per node: the fetcher, the tick loop, and the action executor."""

    def __init__(self, node: Node) -> None:
        self.node = node
        s = node.settings
        self.settings = ReplicationSettings(
            replica_lag_time_ms=s.replica_lag_time_ms,
            replica_lag_max_records=s.replica_lag_max_records,
            leader_timeout_ms=s.leader_timeout_ms,
            alter_partition_retry_ms=s.alter_partition_retry_ms,
        )
        self.fetcher = ReplicaFetcher(node)
        self._tick_task: asyncio.Task[None] | None = None
        self._bg: set[asyncio.Task[None]] = set()
        self._last_tick_ms = -1
        self._suspect_grace_until_ms = -1
        self._isr_reasons: dict[tuple[str, int], tuple[tuple[int, ...], dict[str, Any]]] = {}
        """The last ISR change this leader proposed per partition, with its reason."""
        self._suspects: dict[tuple[str, int], ReportLeaderSuspect] = {}
        self._suspect_flush: asyncio.Task[None] | None = None
        self._alters: dict[tuple[str, int], tuple[PartitionReplica, LeaderState, SendAlterPartition]] = {}
        self._alter_flush: asyncio.Task[None] | None = None
        self._history: list[dict[str, Any]] = []
        self._history_flush: asyncio.Task[None] | None = None

    # ---- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._tick_task = asyncio.get_running_loop().create_task(self._tick_loop())

    async def stop(self) -> None:
        await cancel_and_wait([self._tick_task, *self._bg])
        await self.fetcher.stop()

    # ---- metadata ------------------------------------------------------------------------
    def apply_meta(
        self, replica: PartitionReplica, meta: PartitionMeta, events: list[dict[str, Any]]
    ) -> None:
        """Role change or ISR/epoch update from the controller's metadata.

        An ISR change is added to ``events`` (the catalog history): with the
        leader's reason when it proposed exactly this ISR, else as the
        controller's own decision (fencing, election).
        """
        old = replica.meta
        replica.broker_epoch = self.node.broker_epoch
        self.execute(replica, replica.update_meta(meta))
        if old is meta or tuple(old.isr) == tuple(meta.isr) or old.topic != meta.topic:
            return
        key = (meta.topic, meta.partition)
        proposed = self._isr_reasons.get(key)
        removed = [b for b in old.isr if b not in meta.isr]
        added = [b for b in meta.isr if b not in old.isr]
        if proposed is not None and proposed[0] == tuple(meta.isr):
            why = dict(proposed[1])
            del self._isr_reasons[key]
        elif meta.leader != self.node.settings.node_id:
            why = {"reason": f"seen as a follower: proposed by leader {meta.leader} or decided "
                             "by the controller (fencing, election)"}
        else:
            why = {"reason": "by the controller: broker fenced, leader suspected or re-elected"}
        events.append({
            "ts_ms": now_ms(), "topic": meta.topic, "partition": meta.partition,
            "kind": "isr_shrink" if removed else "isr_expand",
            "leader_epoch": meta.leader_epoch, "reason": why.pop("reason"),
            "detail": {**why, "added": added, "removed": removed, "old_isr": list(old.isr),
                       "new_isr": list(meta.isr), "partition_epoch": meta.partition_epoch},
        })

    def replan(self) -> None:
        self.fetcher.replan()

    # ---- actions -------------------------------------------------------------------------
    def execute(
        self, replica: PartitionReplica, actions: list[Action], records: bytes | memoryview = b""
    ) -> None:
        """Carry out the core's actions in order (they are few and usually none)."""
        for a in actions:
            if isinstance(a, HighWatermarkAdvanced):
                replica.on_hw_advanced()
            elif isinstance(a, AppendFetched):
                replica.append_fetched(records)
            elif isinstance(a, Truncate):
                log.info("%s/%d: truncating to %d (LEO %d) on divergence", replica.topic,
                         replica.partition, a.offset, replica.log_end_offset)
                self._record_truncation(replica, a.offset)
                replica.truncate(a.offset)
            elif isinstance(a, SendAlterPartition):
                ls = replica.leader_state
                if ls is not None:
                    key = (replica.topic, replica.partition)
                    self._isr_reasons[key] = (tuple(a.new_isr), self._isr_reason(ls, a))
                    self._queue_alter(replica, ls, a)
            elif isinstance(a, ReportLeaderSuspect):
                self._queue_suspect(replica, a)

    def _record_truncation(self, replica: PartitionReplica, offset: int) -> None:
        """History row for a divergence truncation (seed 001 §6.6, KIP-101/KIP-320)."""
        fs = replica.follower_state
        leo = replica.log_end_offset
        leader = fs.leader if fs else None
        self._history.append({
            "ts_ms": now_ms(), "topic": replica.topic, "partition": replica.partition,
            "kind": "truncation", "leader_epoch": fs.leader_epoch if fs else None,
            "reason": f"log diverged from leader {leader}'s: dropped {leo - offset} records "
                      f"from offset {offset} (LEO was {leo})",
            "detail": {"from_leo": leo, "to_offset": offset, "leader": leader,
                       "last_epoch": replica.log.latest_epoch},
        })
        if self._history_flush is None or self._history_flush.done():
            self._history_flush = asyncio.get_running_loop().create_task(self._flush_history())
            self._bg.add(self._history_flush)
            self._history_flush.add_done_callback(self._bg.discard)

    async def _flush_history(self) -> None:
        """Write buffered history rows in one transaction, off the event loop (a failover
        can truncate hundreds of partitions at once)."""
        catalog = self.node.catalog
        while self._history and catalog is not None:
            rows, self._history = self._history, []
            try:
                await asyncio.to_thread(catalog.add_events, rows)
            except Exception:
                log.exception("could not write %d history rows", len(rows))

    @staticmethod
    def _isr_reason(ls: LeaderState, a: SendAlterPartition) -> dict[str, Any]:
        """Why the ISR changes, for the history (seed 001 §6.5.3; Kafka/Fluvio shrink rules)."""
        removed = [b for b in ls.isr if b not in a.new_isr]
        now = now_ms()
        why: dict[str, Any] = {"proposed_by": ls.local_broker, "leader_leo": ls.log_end_offset,
                               "high_watermark": ls.high_watermark}
        if removed:
            parts = []
            for b in removed:
                p = ls.replicas.get(b)
                lag = ls.log_end_offset - (p.log_end_offset if p else 0)
                since = now - p.last_caught_up_ms if p and p.last_caught_up_ms >= 0 else None
                parts.append(f"replica {b} lags {lag} records, last caught up "
                             + (f"{since} ms ago" if since is not None else "never"))
            why["reason"] = "; ".join(parts)
        else:
            why["reason"] = "caught up: reached the HW and LESO in this leader epoch"
        return why

    def _queue_alter(self, replica: PartitionReplica, ls: LeaderState, a: SendAlterPartition) -> None:
        """Queue an ISR change; one request carries every pending change.

        A follower broker dying shrinks the ISR of every partition it follows
        here at the same tick: one call (one raft commit) per partition
        serialised thousands of commits on the controller. A newer change of
        the same partition replaces a queued one (the core resends on retry).
        """
        self._alters[(replica.topic, replica.partition)] = (replica, ls, a)
        if self._alter_flush is None or self._alter_flush.done():
            self._alter_flush = asyncio.get_running_loop().create_task(self._send_alters())
            self._bg.add(self._alter_flush)
            self._alter_flush.add_done_callback(self._bg.discard)

    async def _send_alters(self) -> None:
        node = self.node
        assert node.agent is not None
        await asyncio.sleep(0)  # let the rest of this tick's changes join the batch
        while self._alters:
            batch, self._alters = list(self._alters.values()), {}
            body = {
                "broker_id": node.settings.node_id, "broker_epoch": node.broker_epoch,
                "partitions": [
                    {"topic": r.topic, "partition": r.partition, "leader_epoch": a.leader_epoch,
                     "partition_epoch": a.partition_epoch, "new_isr": list(a.new_isr),
                     "broker_epochs": {str(k): v for k, v in a.broker_epochs.items()}}
                    for r, _, a in batch
                ],
            }
            try:
                out = await node.agent.call("alter_partitions", body)
            except (ControllerError, ApiError, OSError) as e:
                log.info("alter_partitions for %d partitions not answered (%s); the tick retries",
                         len(batch), e)
                continue
            for (replica, ls, _), res in zip(batch, out["results"], strict=True):
                self._alter_answered(replica, ls, res)

    def _alter_answered(self, replica: PartitionReplica, ls: LeaderState, res: dict[str, Any]) -> None:
        if replica.leader_state is not ls or self.node.partitions.get(
            (replica.topic, replica.partition)
        ) is not replica:
            return  # deposed or dropped meanwhile: the answer is moot
        error = res.get("error")
        if error is None:
            actions = ls.on_alter_partition_result(
                isr=tuple(int(b) for b in res["isr"]), partition_epoch=int(res["partition_epoch"]),
            )
        else:
            log.info("alter_partition %s/%d refused: %s", replica.topic, replica.partition, error)
            actions = ls.on_alter_partition_result(error=str(error))
        self.execute(replica, actions)

    def _queue_suspect(self, replica: PartitionReplica, a: ReportLeaderSuspect) -> None:
        """Queue a report; one request carries every pending report.

        A dead leader broker makes every partition it led suspect at once: one
        request (and one controller decision) per partition meant thousands of
        concurrent calls that saturated this process and the controller.
        """
        self._suspects[(replica.topic, replica.partition)] = a
        if self._suspect_flush is None or self._suspect_flush.done():
            self._suspect_flush = asyncio.get_running_loop().create_task(self._report_suspects())
            self._bg.add(self._suspect_flush)
            self._suspect_flush.add_done_callback(self._bg.discard)

    async def _report_suspects(self) -> None:
        node = self.node
        assert node.agent is not None
        await asyncio.sleep(0)  # let the rest of this tick's reports join the batch
        while self._suspects:
            batch, self._suspects = self._suspects, {}
            log.info("reporting %d partitions' leaders as suspect (no successful fetch)",
                     len(batch))
            with contextlib.suppress(ControllerError, ApiError, OSError):
                await node.agent.call("leader_suspects", {
                    "broker_id": node.settings.node_id, "broker_epoch": node.broker_epoch,
                    "reports": [
                        [t, p, a.leader_epoch, a.partition_epoch, a.log_end_offset]
                        for (t, p), a in batch.items()
                    ],
                })

    # ---- time ----------------------------------------------------------------------------
    async def _tick_loop(self) -> None:
        interval_s = self.node.settings.replica_tick_ms / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.tick(now_ms())
            except Exception:  # a failure must not stop ISR maintenance
                log.exception("replication tick failed")

    def tick(self, now: int) -> None:
        """One tick of every replica's protocol clock.

        After a stall of this process (SIGSTOP, a starved event loop) every
        follower's last successful fetch looks old although no leader failed:
        suspicion reports wait one ``leader_timeout_ms`` so the fetchers can
        prove the leaders alive first (ISR shrinking on the leader side is not
        delayed: a stalled leader's followers really were not heard from).
        """
        stall_ms = 10 * self.node.settings.replica_tick_ms
        if self._last_tick_ms >= 0 and now - self._last_tick_ms > stall_ms:
            self._suspect_grace_until_ms = now + self.settings.leader_timeout_ms
            log.info("tick loop stalled %d ms; holding leader-suspect reports",
                     now - self._last_tick_ms)
        self._last_tick_ms = now
        suspect_ok = now >= self._suspect_grace_until_ms
        for r in list(self.node.partitions.values()):
            if r.leader_state is not None:
                self.execute(r, r.leader_state.tick(now))
            elif r.follower_state is not None and suspect_ok:
                self.execute(r, r.follower_state.tick(r.log, now))
