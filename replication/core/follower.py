"""The follower's side of a partition (sans-I/O): fetch requests, responses, suspicion.

Rules, each with its seed section:

* Fetches carry the follower's LEO, the epoch of its last record and the
  leader epoch it believes current (KIP-320; ARCHITECTURE.md).
* The follower adopts the leader's HW capped at its own LEO; its local HW is
  therefore not monotonic (seed 001 §6.4).
* On ``diverging_epoch`` it truncates to where its log and the leader's agree
  for that epoch, never blindly to its HW (KIP-101; seed 001 §6.6; seed 000
  "Partition Follower Failure"); a mismatch of epochs takes another round.
* No successful fetch for ``leader_timeout_ms`` → ``ReportLeaderSuspect``,
  repeated at that interval while it lasts (seed 000 "Partition Leader Failure").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.core import messages as M
from replication.core.actions import Action, AppendFetched, ReportLeaderSuspect, Truncate
from replication.core.log import ReplicaLog
from replication.core.rules import ALL_ON, ReplicationSettings, SafetyRules

NO_LEADER = -1


@dataclass(slots=True)
class FollowerState:
    """A partition this broker follows (or waits on while it has no leader).

    ``leader`` is ``NO_LEADER`` (-1) while the partition is offline.
    ``high_watermark`` is the local HW: the leader's HW capped at the LEO.
    """

    local_broker: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    broker_epoch: int
    high_watermark: int
    last_fetch_ok_ms: int
    settings: ReplicationSettings = field(default_factory=ReplicationSettings)
    rules: SafetyRules = ALL_ON
    leader_high_watermark: int = 0
    last_report_ms: int = -1

    @classmethod
    def become_follower(
        cls,
        *,
        local_broker: int,
        leader: int,
        leader_epoch: int,
        partition_epoch: int,
        broker_epoch: int,
        log: ReplicaLog,
        high_watermark: int,
        now_ms: int,
        settings: ReplicationSettings | None = None,
        rules: SafetyRules = ALL_ON,
    ) -> tuple[FollowerState, list[Action]]:
        """Start following ``leader`` at ``leader_epoch``.

        Nothing is truncated here: the first fetch in the new epoch finds the
        divergence point (seed 001 §6.6). Only with ``truncate_by_leader_epoch``
        switched off (fault injection) does it truncate to the local HW, the
        pre-KIP-101 behaviour.
        """
        hw = max(log.log_start_offset, min(high_watermark, log.log_end_offset))
        state = cls(
            local_broker=local_broker,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            broker_epoch=broker_epoch,
            high_watermark=hw,
            last_fetch_ok_ms=now_ms,
            settings=settings or ReplicationSettings(),
            rules=rules,
            leader_high_watermark=hw,
        )
        actions: list[Action] = []
        if not rules.truncate_by_leader_epoch and hw < log.log_end_offset:
            actions.append(Truncate(hw))
        return state, actions

    def on_metadata(self, *, partition_epoch: int) -> None:
        """Newer partition metadata at the same leader epoch (ISR changes)."""
        self.partition_epoch = max(self.partition_epoch, partition_epoch)

    # ------------------------------------------------------------------ fetching
    def build_fetch(self, log: ReplicaLog) -> M.FetchRequest | None:
        """The next fetch request; ``None`` while there is no leader."""
        if self.leader == NO_LEADER:
            return None
        return M.FetchRequest(
            fetch_offset=log.log_end_offset,
            last_fetched_epoch=log.latest_epoch,
            current_leader_epoch=self.leader_epoch,
            broker_epoch=self.broker_epoch,
            replica_id=self.local_broker,
        )

    def on_fetch_response(
        self, req: M.FetchRequest, resp: M.FetchResponse, log: ReplicaLog, now_ms: int
    ) -> list[Action]:
        """Apply the leader's answer to ``req``.

        Returns ``[AppendFetched(offset)]`` when the shipped records must be
        appended, ``[Truncate(offset)]`` on divergence, ``[]`` otherwise. An
        answer to a request built from another state of the log or another
        leader epoch (late, duplicated, reordered) is ignored: it could only
        be acted on wrongly. After executing the action the driver calls
        :meth:`on_log_changed`.
        """
        if not self._current(req, resp, log):
            return []
        if resp.error is not None:
            return []
        self.last_fetch_ok_ms = now_ms
        self.leader_high_watermark = resp.hw
        self.high_watermark = min(resp.hw, log.log_end_offset)
        if resp.diverging_epoch is not None:
            target = self._truncation_offset(resp.diverging_epoch, log)
            assert target < log.log_end_offset, "a divergence answer must shorten the log"
            return [Truncate(target)]
        if resp.records_available:
            return [AppendFetched(log.log_end_offset)]
        return []

    def _current(self, req: M.FetchRequest, resp: M.FetchResponse, log: ReplicaLog) -> bool:
        return (
            self.leader != NO_LEADER
            and req.current_leader_epoch == self.leader_epoch
            and req.fetch_offset == log.log_end_offset
            and req.last_fetched_epoch == log.latest_epoch
            and resp.fetch_offset == req.fetch_offset
            and (resp.error is not None or resp.leader_epoch == self.leader_epoch)
        )

    def _truncation_offset(self, d: M.DivergingEpoch, log: ReplicaLog) -> int:
        """Where the logs agree (KIP-320 follower side).

        Our largest epoch <= the answered one: when it is the same epoch, the
        logs agree up to the smaller of the two end offsets; when it is older,
        we keep up to its end and the next fetch checks again.
        """
        leo = log.log_end_offset
        if not self.rules.truncate_by_leader_epoch:
            return min(self.high_watermark, leo - 1)
        if d.epoch < 0:
            return min(max(d.end_offset, log.log_start_offset), leo - 1)
        epoch, end = log.end_offset_for_epoch(d.epoch)
        if epoch < 0:
            return log.log_start_offset
        if epoch == d.epoch:
            return min(d.end_offset, end)
        return min(end, leo - 1)

    def on_log_changed(self, log: ReplicaLog) -> None:
        """After an append or truncation: local HW = min(leader HW, LEO)."""
        self.high_watermark = max(
            log.log_start_offset, min(self.leader_high_watermark, log.log_end_offset)
        )
        assert self.high_watermark <= log.log_end_offset, "hw <= leo"

    # ------------------------------------------------------------------ time
    def tick(self, log: ReplicaLog, now_ms: int) -> list[Action]:
        """Report the leader as suspect after ``leader_timeout_ms`` without a
        successful fetch, and again every ``leader_timeout_ms`` while it lasts."""
        if self.leader == NO_LEADER:
            return []
        timeout = self.settings.leader_timeout_ms
        if now_ms - self.last_fetch_ok_ms < timeout:
            return []
        if self.last_report_ms >= 0 and now_ms - self.last_report_ms < timeout:
            return []
        self.last_report_ms = now_ms
        return [
            ReportLeaderSuspect(
                leader=self.leader,
                leader_epoch=self.leader_epoch,
                partition_epoch=self.partition_epoch,
                log_end_offset=log.log_end_offset,
            )
        ]
