"""The leader's side of a partition (sans-I/O): fetch answers, HW, ISR changes.

Time is a parameter and there is no I/O: the server and the simulator drive
the same object. Offsets follow Kafka's exclusive convention: records below
the high watermark (HW) are committed; the log end offset (LEO) is the next
offset to be written.

Rules, each with its seed section:

* HW = min fetch offset over the Maximal ISR (ISR ∪ proposed ISR), advanced
  only while |ISR| >= min ISR, never backwards (seed 001 §6.5.2, §6.5.4).
* LESO = LEO when this broker became leader; until HW >= LESO the HW is
  "unknown" wherever monotonicity matters (§6.4.2).
* A fetch naming another leader epoch is fenced; one whose last fetched epoch
  or offset does not match the epoch cache gets ``diverging_epoch`` (KIP-101,
  KIP-320; §6.6).
* A follower joins the ISR when it reached the local HW, reached LESO and
  fetched in the current leader epoch (§6.5.3, §6.5.4); it leaves when its
  last caught-up time is older than ``replica_lag_time_ms`` (Kafka) or it
  lags more than ``replica_lag_max_records`` (seed 002).
* ISR changes go to the controller as ``SendAlterPartition`` and stay pending
  (``PendingExpand``/``PendingShrink``) until answered (§6.3 rule 4, §6.5.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from replication.core import messages as M
from replication.core.actions import Action, HighWatermarkAdvanced, SendAlterPartition
from replication.core.log import ReplicaLog
from replication.core.pending import (
    KEEP_PENDING_ERRORS,
    PendingAlterPartition,
    PendingExpand,
    PendingShrink,
)
from replication.core.rules import ALL_ON, ReplicationSettings, SafetyRules


@dataclass(slots=True)
class ReplicaProgress:
    """What the leader knows of one follower, as of its last fetch.

    ``log_end_offset``: the fetch offset of its last matching fetch (0 before
    any). ``last_fetch_ms``/``last_caught_up_ms``/``last_heard_ms``: -1 when
    never. ``fetch_leader_epoch``: the leader epoch its last matching fetch
    arrived in (§6.5.4 condition 3). ``broker_epoch``: from its fetches.
    """

    broker: int
    log_end_offset: int = 0
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_heard_ms: int = -1
    broker_epoch: int = -1
    fetch_leader_epoch: int = -1
    leader_leo_at_last_fetch: int = -1


@dataclass(slots=True)
class LeaderState:
    """A partition this broker leads.

    ``isr`` is the committed ISR (as the controller last confirmed it);
    ``proposed_isr`` the ISR of the AlterPartition in flight (``None`` when
    none); ``replicas`` the progress of each follower; ``assignment`` the
    partition's replica set (empty: the ISR is the replica set, single node).
    """

    local_broker: int
    leader_epoch: int
    isr: tuple[int, ...]
    min_insync_replicas: int
    high_watermark: int
    log_end_offset: int
    leader_epoch_start_offset: int
    proposed_isr: tuple[int, ...] | None = None
    replicas: dict[int, ReplicaProgress] = field(default_factory=dict)
    partition_epoch: int = 0
    assignment: tuple[int, ...] = ()
    log_start_offset: int = 0
    settings: ReplicationSettings = field(default_factory=ReplicationSettings)
    rules: SafetyRules = ALL_ON
    pending: PendingAlterPartition | None = None
    awaiting_metadata: bool = False
    """True after an answer that leaves the pending change's fate unknown."""
    uncertain: tuple[int, ...] = ()
    """Replicas of a refused expansion that a stray copy of the request (a retry
    still in flight) could yet add: they count toward the HW until the partition
    epoch moves past ``uncertain_epoch``, after which no copy can apply."""
    uncertain_epoch: int = -1

    def __post_init__(self) -> None:
        assert self.local_broker in self.isr, "the leader is always in its ISR"
        assert self.high_watermark <= self.log_end_offset
        if not self.assignment:
            self.assignment = tuple(self.isr)
        self._check_isr(self.isr)

    # ------------------------------------------------------------ becoming leader
    @classmethod
    def become_leader(
        cls,
        *,
        local_broker: int,
        leader_epoch: int,
        partition_epoch: int,
        isr: tuple[int, ...],
        assignment: tuple[int, ...],
        min_insync_replicas: int,
        log: ReplicaLog,
        high_watermark: int,
        now_ms: int,
        settings: ReplicationSettings | None = None,
        rules: SafetyRules = ALL_ON,
    ) -> LeaderState:
        """Take up leadership at ``leader_epoch``: LESO = LEO (seed 001 §6.4.2).

        ``high_watermark`` is this replica's local HW (it may be stale, §6.4.1);
        it is capped at the LEO. Followers in the ISR start caught up as of
        ``now_ms`` so they are not shrunk before they could fetch.
        """
        leo = log.log_end_offset
        state = cls(
            local_broker=local_broker,
            leader_epoch=leader_epoch,
            isr=tuple(isr),
            min_insync_replicas=min_insync_replicas,
            high_watermark=max(log.log_start_offset, min(high_watermark, leo)),
            log_end_offset=leo,
            leader_epoch_start_offset=leo,
            partition_epoch=partition_epoch,
            assignment=tuple(assignment),
            log_start_offset=log.log_start_offset,
            settings=settings or ReplicationSettings(),
            rules=rules,
        )
        for b in state.assignment:
            if b != local_broker:
                state.replicas[b] = ReplicaProgress(
                    b, last_caught_up_ms=now_ms if b in state.isr else -1
                )
        return state

    # ------------------------------------------------------------------ views
    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """ISR ∪ proposed ISR while an AlterPartition is in flight (seed 001 §6.5.2)."""
        extra = set(self.proposed_isr or ())
        if self.uncertain and self.partition_epoch <= self.uncertain_epoch:
            extra |= set(self.uncertain)
        if not extra - set(self.isr):
            return self.isr
        return tuple(sorted(set(self.isr) | extra))

    def can_commit(self) -> bool:
        """acks=all precondition: enough replicas in the ISR (NOT_ENOUGH_REPLICAS otherwise)."""
        return len(self.isr) >= self.min_insync_replicas

    @property
    def applied_high_watermark(self) -> int | None:
        """The HW, or None while it is below LESO ("HW unknown", seed 001 §6.4.2)."""
        if self.rules.applied_hw_rule and self.high_watermark < self.leader_epoch_start_offset:
            return None
        return self.high_watermark

    def live_replicas(self, now_ms: int) -> tuple[int, ...]:
        """LRS (seed 002): the leader and every replica heard from within
        ``replica_lag_time_ms``, in sync or not; in assignment order."""
        lag = self.settings.replica_lag_time_ms
        out = []
        for b in self.assignment:
            p = self.replicas.get(b)
            if b == self.local_broker or (
                p is not None and p.last_heard_ms >= 0 and now_ms - p.last_heard_ms <= lag
            ):
                out.append(b)
        return tuple(out)

    # ------------------------------------------------------------------ appends
    def on_local_append(self, log_end_offset: int) -> bool:
        """The leader appended up to ``log_end_offset``; returns True if the HW moved."""
        assert log_end_offset >= self.log_end_offset, "a leader's log never shrinks"
        self.log_end_offset = log_end_offset
        return self._advance_hw()

    # ------------------------------------------------------------------ fetches
    def handle_fetch(
        self, req: M.FetchRequest, log: ReplicaLog, now_ms: int
    ) -> tuple[M.FetchResponse, list[Action]]:
        """Answer a follower's fetch and update what is known of it.

        The driver ships records from ``req.fetch_offset`` when the answer has
        ``records_available``. Actions: ``SendAlterPartition`` when the fetch
        makes the follower eligible for the ISR, ``HighWatermarkAdvanced``
        when it moves the HW.
        """
        self._sync_log(log)

        def answer(**kw: object) -> M.FetchResponse:
            return M.FetchResponse(
                fetch_offset=req.fetch_offset,
                hw=self.high_watermark,
                leader_epoch=self.leader_epoch,
                log_start_offset=self.log_start_offset,
                **kw,  # type: ignore[arg-type]
            )

        if req.current_leader_epoch < self.leader_epoch:
            return answer(error=M.FENCED_LEADER_EPOCH), []
        if req.current_leader_epoch > self.leader_epoch:
            return answer(error=M.UNKNOWN_LEADER_EPOCH), []
        if req.replica_id not in self.assignment or req.replica_id == self.local_broker:
            return answer(error=M.NOT_REPLICA), []
        p = self.replicas.get(req.replica_id)
        if p is None:
            p = self.replicas[req.replica_id] = ReplicaProgress(req.replica_id)
        if req.broker_epoch < p.broker_epoch:
            return answer(error=M.STALE_BROKER_EPOCH), []
        if req.broker_epoch > p.broker_epoch and p.broker_epoch >= 0:
            # A new incarnation of the broker: what the old one fetched says nothing now.
            p.log_end_offset = 0
            p.fetch_leader_epoch = -1
            p.leader_leo_at_last_fetch = -1
        p.broker_epoch = req.broker_epoch
        p.last_heard_ms = now_ms
        diverging = self._divergence(req, log)
        if diverging is not None:
            return answer(diverging_epoch=diverging), []
        if req.fetch_offset < self.log_start_offset or req.fetch_offset > self.log_end_offset:
            return answer(error=M.OFFSET_OUT_OF_RANGE), []
        self._record_fetch(p, req.fetch_offset, now_ms)
        actions: list[Action] = []
        if self._advance_hw():
            actions.append(HighWatermarkAdvanced(self.high_watermark))
        expand = self._maybe_expand(p, now_ms)
        if expand is not None:
            actions.append(expand)
        return answer(records_available=req.fetch_offset < self.log_end_offset), actions

    def _divergence(self, req: M.FetchRequest, log: ReplicaLog) -> M.DivergingEpoch | None:
        """KIP-320: does the follower's last fetched epoch/offset match our epoch cache?"""
        if req.last_fetched_epoch < 0:
            if req.fetch_offset > self.log_start_offset:
                return M.DivergingEpoch(-1, self.log_start_offset)
            return None
        epoch, end = log.end_offset_for_epoch(req.last_fetched_epoch)
        if epoch < 0:
            return M.DivergingEpoch(-1, self.log_start_offset)
        if epoch < req.last_fetched_epoch or end < req.fetch_offset:
            return M.DivergingEpoch(epoch, end)
        return None

    def _record_fetch(self, p: ReplicaProgress, fetch_offset: int, now_ms: int) -> None:
        """Kafka's caught-up rule: caught up now if it reached our LEO; caught up
        as of its previous fetch if it reached the LEO we had then."""
        leo = self.log_end_offset
        if fetch_offset >= leo:
            p.last_caught_up_ms = now_ms
        elif p.leader_leo_at_last_fetch >= 0 and fetch_offset >= p.leader_leo_at_last_fetch:
            p.last_caught_up_ms = max(p.last_caught_up_ms, p.last_fetch_ms)
        p.leader_leo_at_last_fetch = leo
        p.last_fetch_ms = now_ms
        p.log_end_offset = fetch_offset
        p.fetch_leader_epoch = self.leader_epoch

    # ------------------------------------------------------------------ ISR changes
    def _maybe_expand(self, p: ReplicaProgress, now_ms: int) -> SendAlterPartition | None:
        """Propose adding ``p`` when it is in sync (seed 001 §6.5.3, §6.5.4)."""
        if self.pending is not None or p.broker in self.isr:
            return None
        if self.rules.expansion_requires_caught_up:
            in_sync = (
                p.log_end_offset >= self.high_watermark  # 1. reached the local HW
                and p.log_end_offset >= self.leader_epoch_start_offset  # 2. reached LESO
                and p.fetch_leader_epoch == self.leader_epoch  # 3. fetched in this epoch
                # and not one the shrink rules would remove again at once (the
                # HW may be stuck while |ISR| < min ISR): no ISR flapping
                and not self._out_of_sync(p, now_ms)
            )
        else:
            in_sync = p.last_fetch_ms >= 0
        if not in_sync:
            return None
        new_isr = (*self.isr, p.broker)
        return self._propose(
            PendingExpand(
                new_isr, self.partition_epoch, p.broker, {p.broker: p.broker_epoch}, now_ms
            )
        )

    def _out_of_sync(self, p: ReplicaProgress, now_ms: int) -> bool:
        if p.log_end_offset >= self.log_end_offset:
            return False
        if now_ms - p.last_caught_up_ms > self.settings.replica_lag_time_ms:
            return True
        return self._lags_by_records(p)

    def _lags_by_records(self, p: ReplicaProgress) -> bool:
        """More than ``replica_lag_max_records`` behind the LEO (seed 002); never when 0."""
        lag_max = self.settings.replica_lag_max_records
        return lag_max > 0 and self.log_end_offset - p.log_end_offset > lag_max

    def _propose(self, pending: PendingAlterPartition) -> SendAlterPartition:
        self._check_isr(pending.proposed_isr)
        self.pending = pending
        self.proposed_isr = pending.proposed_isr
        self.awaiting_metadata = False
        return self._request(pending)

    def _request(self, pending: PendingAlterPartition) -> SendAlterPartition:
        return SendAlterPartition(
            leader_epoch=self.leader_epoch,
            partition_epoch=pending.partition_epoch,
            new_isr=pending.proposed_isr,
            broker_epochs=dict(pending.broker_epochs),
        )

    def tick(self, now_ms: int) -> list[Action]:
        """Time-driven work: shrink lagging followers, resend an unanswered AlterPartition."""
        if self.pending is not None:
            if (
                not self.awaiting_metadata
                and now_ms - self.pending.sent_ms >= self.settings.alter_partition_retry_ms
            ):
                self.pending = replace(self.pending, sent_ms=now_ms)
                return [self._request(self.pending)]
            return []
        removed = tuple(
            b
            for b in self.isr
            if b != self.local_broker
            and self._out_of_sync(self.replicas.setdefault(b, ReplicaProgress(b)), now_ms)
        )
        if not removed:
            return []
        new_isr = tuple(b for b in self.isr if b not in removed)
        return [self._propose(PendingShrink(new_isr, self.partition_epoch, removed, {}, now_ms))]

    def on_alter_partition_result(
        self,
        *,
        error: str | None = None,
        isr: tuple[int, ...] | None = None,
        partition_epoch: int = -1,
    ) -> list[Action]:
        """The controller answered the pending AlterPartition.

        Success (``error`` None) carries the committed ``isr`` and
        ``partition_epoch``: the leader adopts them (§6.5.2 "commits the ISR
        change"). ``INELIGIBLE_REPLICA``/``INVALID_REQUEST`` mean the controller
        checked our partition epoch and refused: roll back. Any other error
        leaves the change's fate unknown (an earlier copy may have committed),
        so the Maximal ISR stays until metadata arrives (Kafka does the same).
        A late answer to an older request is ignored.
        """
        pending = self.pending
        if pending is None:
            return []
        if error is None:
            assert isr is not None
            if self.rules.partition_epoch_check and partition_epoch != pending.partition_epoch + 1:
                return []
            return self._adopt(tuple(isr), partition_epoch)
        if error in KEEP_PENDING_ERRORS and self.rules.partition_epoch_check:
            self.awaiting_metadata = True
            return []
        if self.rules.partition_epoch_check:
            # Refused at our partition epoch; but a retried copy still in flight
            # may be accepted later at that same epoch (say, once the replica is
            # unfenced). Its replicas keep counting until the epoch moves on.
            self.uncertain = tuple(b for b in pending.proposed_isr if b not in self.isr)
            self.uncertain_epoch = pending.partition_epoch
        self.pending = None
        self.proposed_isr = None
        self.awaiting_metadata = False
        return []

    def on_metadata(
        self,
        *,
        isr: tuple[int, ...],
        partition_epoch: int,
        assignment: tuple[int, ...] | None = None,
        min_insync_replicas: int | None = None,
    ) -> list[Action]:
        """Committed partition metadata at this leader epoch arrived.

        A newer partition epoch replaces the ISR and ends any pending change
        (it either committed, and the ISR shows it, or was superseded and the
        controller will refuse it by its epoch). An older or equal epoch is
        ignored.
        """
        if min_insync_replicas is not None:
            self.min_insync_replicas = min_insync_replicas
        if assignment is not None:
            self.assignment = tuple(assignment)
        if self.rules.partition_epoch_check and partition_epoch <= self.partition_epoch:
            return self._hw_actions()
        if self.local_broker not in isr:
            return []  # we are being deposed; the driver switches roles on the leader change
        return self._adopt(tuple(isr), partition_epoch)

    def _adopt(self, isr: tuple[int, ...], partition_epoch: int) -> list[Action]:
        self._check_isr(isr)
        self.isr = isr
        self.partition_epoch = max(self.partition_epoch, partition_epoch)
        if self.partition_epoch > self.uncertain_epoch:
            self.uncertain = ()
        self.pending = None
        self.proposed_isr = None
        self.awaiting_metadata = False
        return self._hw_actions()

    # ------------------------------------------------------------------ HW
    def _hw_actions(self) -> list[Action]:
        return [HighWatermarkAdvanced(self.high_watermark)] if self._advance_hw() else []

    def _replica_leo(self, broker: int) -> int:
        if broker == self.local_broker:
            return self.log_end_offset
        progress = self.replicas.get(broker)
        return progress.log_end_offset if progress else 0

    def _advance_hw(self) -> bool:
        """HW = min fetch offset over the Maximal ISR while |ISR| >= min ISR (§6.5.2)."""
        if len(self.isr) < self.min_insync_replicas:
            return False
        quorum = self.maximal_isr if self.rules.hw_over_maximal_isr else self.isr
        candidate = min(self._replica_leo(b) for b in quorum)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            assert self.high_watermark <= self.log_end_offset, "hw <= leo"
            return True
        return False

    def _sync_log(self, log: ReplicaLog) -> None:
        leo = log.log_end_offset
        assert leo >= self.log_end_offset, "a leader's log never shrinks"
        self.log_end_offset = leo
        self.log_start_offset = log.log_start_offset

    def _check_isr(self, isr: tuple[int, ...]) -> None:
        assert set(isr) <= set(self.assignment), f"ISR {isr} not within {self.assignment}"
        assert len(set(isr)) == len(isr), f"ISR {isr} has repeats"
