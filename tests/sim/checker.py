"""Named invariants of seed 001 §6, checked after every simulated step.

The checker keeps the *committed log* of every partition: whenever any leader
advances its HW to h, its log below h is committed. Committed records must
never change (a leader that commits a different record at a committed offset
has lost data). Every invariant is phrased against it, which keeps each check
O(1) amortised (``SimLog.match_committed``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replication.controller.image import NO_LEADER, MetadataImage, PartitionMeta
from replication.controller.invariants import violations as image_violations
from replication.core.leader import LeaderState

if TYPE_CHECKING:
    from tests.sim.broker import SimBroker
    from tests.sim.simlog import SimLog

Key = tuple[str, int]

LEADER_COMPLETENESS = "Leader Completeness"
LEADER_CANDIDATE_COMPLETENESS = "Leader Candidate Completeness"
LOG_MATCHING = "Log Matching"
HW_MONOTONIC = "HW monotonic as seen by consumers"
ACKED_WRITES = "No acks=all write lost or reordered"
ONE_LEADER_PER_EPOCH = "At most one leader per leader epoch"
EPOCHS_MONOTONIC = "Epochs monotonic"
UNCLEAN_EXCLUSION = "Unclean Exclusion"
ISR_WITHIN_REPLICAS = "ISR within replicas"
CONTROLLER_IMAGE = "Controller image sound"
CORE_ASSERTION = "Asserted invariant of the core"

INVARIANTS = (
    LEADER_COMPLETENESS,
    LEADER_CANDIDATE_COMPLETENESS,
    LOG_MATCHING,
    HW_MONOTONIC,
    ACKED_WRITES,
    ONE_LEADER_PER_EPOCH,
    EPOCHS_MONOTONIC,
    UNCLEAN_EXCLUSION,
    ISR_WITHIN_REPLICAS,
    CONTROLLER_IMAGE,
    CORE_ASSERTION,
)


class Violation(AssertionError):
    """A named invariant broke; ``str()`` names it and says how."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


@dataclass(slots=True)
class _Joined:
    """When a broker incarnation registered unclean, and whether it has since rejoined."""

    broker_epoch: int
    rejoined: set[Key]


class Checker:
    """Invariants over the controller image and every live broker."""

    def __init__(self, keys: Iterable[Key]) -> None:
        self.committed: dict[Key, list[int]] = {k: [] for k in keys}
        self.acked: dict[Key, dict[int, int]] = {k: {} for k in self.committed}
        self.epoch_leaders: dict[tuple[Key, int], tuple[int, int]] = {}
        self.consumer_hw: dict[tuple[int, Key], int] = {}
        self.unclean: dict[int, _Joined] = {}
        self.last_partition: dict[Key, tuple[int, int]] = {}
        self.checks = 0
        self.recoveries = 0

    # ------------------------------------------------------------------ events
    def on_leader_hw(self, broker: int, key: Key, log: SimLog, hw: int) -> None:
        """A leader's HW is ``hw``: its log below it is committed from now on."""
        committed = self.committed[key]
        matched = log.match_committed(committed)
        if matched < min(hw, len(committed)):
            raise Violation(
                LEADER_COMPLETENESS,
                f"broker {broker} commits {key} up to {hw} but differs from the committed "
                f"log at offset {matched} ({log.records[matched]} != {committed[matched]})",
            )
        if hw > len(committed):
            committed.extend(log.records[len(committed) : hw])

    def on_ack(self, key: Key, offset: int, record: int) -> None:
        """An acks=all produce is acknowledged: it must be committed at ``offset``."""
        committed = self.committed[key]
        if offset >= len(committed) or committed[offset] != record:
            raise Violation(ACKED_WRITES, f"record {record} acked at {key}@{offset} not committed")
        self.acked[key][offset] = record

    def on_role(self, broker: int, key: Key, old_epoch: int, new_epoch: int) -> None:
        """A broker switches roles: within one incarnation leader epochs only grow."""
        if new_epoch < old_epoch:
            raise Violation(
                EPOCHS_MONOTONIC,
                f"broker {broker} {key} leader epoch went from {old_epoch} to {new_epoch}",
            )

    def on_become_leader(self, key: Key, epoch: int, broker: int, incarnation: int) -> None:
        who = self.epoch_leaders.setdefault((key, epoch), (broker, incarnation))
        if who != (broker, incarnation):
            raise Violation(
                ONE_LEADER_PER_EPOCH,
                f"{key} epoch {epoch} led by broker {who[0]} (incarnation {who[1]}) "
                f"and by broker {broker} (incarnation {incarnation})",
            )

    def on_consume(
        self, consumer: int, key: Key, offset: int, records: list[int], hw: int
    ) -> None:
        """A consumer read ``records`` from ``offset`` with the HW the leader showed."""
        seen = self.consumer_hw.get((consumer, key), 0)
        if hw < seen:
            raise Violation(HW_MONOTONIC, f"consumer {consumer} saw {key} HW {seen} then {hw}")
        self.consumer_hw[(consumer, key)] = hw
        committed = self.committed[key]
        if committed[offset : offset + len(records)] != records:
            raise Violation(
                HW_MONOTONIC,
                f"consumer {consumer} read {records} at {key}@{offset}, not the committed "
                f"{committed[offset : offset + len(records)]}",
            )

    def on_registered(self, broker: int, broker_epoch: int, clean: bool) -> None:
        if clean:
            self.unclean.pop(broker, None)
        else:
            self.unclean[broker] = _Joined(broker_epoch, set())

    def on_controller_commit(
        self,
        before: dict[Key, PartitionMeta],
        image: MetadataImage,
        brokers: dict[int, SimBroker],
        image_sound: bool = True,
    ) -> None:
        """After the controller applied a decision: image soundness, epochs, ISR joins.

        ``image_sound`` is False while a decision committed in part awaits the
        controller's repair (``ControllerMachine.tick``): its intermediate image
        may list a fenced leader; the data invariants still apply.
        """
        problems = image_violations(image) if image_sound else []
        if problems:
            raise Violation(CONTROLLER_IMAGE, "; ".join(problems))
        for p in image.all_partitions():
            key = (p.topic, p.partition)
            old = before.get(key)
            if old is not None and (
                p.leader_epoch < old.leader_epoch or p.partition_epoch < old.partition_epoch
            ):
                raise Violation(EPOCHS_MONOTONIC, f"{key} epochs went back: {old} -> {p}")
            if not set(p.isr) <= set(p.replicas):
                raise Violation(ISR_WITHIN_REPLICAS, f"{key} ISR {p.isr} vs {p.replicas}")
            if old is not None and p.leader_epoch != old.leader_epoch and p.isr == (p.leader,):
                u = self.unclean.get(p.leader)
                if u is not None and image.brokers[p.leader].broker_epoch == u.broker_epoch:
                    # Unclean recovery (seed 001 §6.8): every last-known ISR member
                    # restarted uncleanly and the controller leads from the longest
                    # log. Allowed; Leader Completeness says whether data was lost.
                    u.rejoined.add(key)
                    self.recoveries += 1
            joined = set(p.isr) - set(old.isr if old is not None else ())
            for b in joined:
                u = self.unclean.get(b)
                if u is None or image.brokers[b].broker_epoch != u.broker_epoch:
                    continue
                u.rejoined.add(key)
                sb = brokers[b]
                if sb.up and sb.broker_epoch == u.broker_epoch:
                    log = sb.disk.log(key)
                    if log.match_committed(self.committed[key]) < len(self.committed[key]):
                        raise Violation(
                            UNCLEAN_EXCLUSION,
                            f"unclean broker {b} rejoined the ISR of {key} without the "
                            f"committed log ({log.log_end_offset} < {len(self.committed[key])})",
                        )

    # ------------------------------------------------------------------ every step
    def check(self, image: MetadataImage, brokers: dict[int, SimBroker]) -> None:
        self.checks += 1
        for p in image.all_partitions():
            self._check_partition(p, image, brokers)
        for b in brokers.values():
            if b.up:
                self._check_broker(b)

    def _check_partition(
        self, p: PartitionMeta, image: MetadataImage, brokers: dict[int, SimBroker]
    ) -> None:
        key = (p.topic, p.partition)
        committed = self.committed[key]
        n = len(committed)
        unclean_allowed = image.topics[p.topic].config.unclean_leader_election
        if p.leader != NO_LEADER:
            lb = brokers[p.leader]
            role = lb.roles.get(key) if lb.up else None
            if (
                isinstance(role, LeaderState)
                and role.leader_epoch == p.leader_epoch
                and lb.disk.log(key).match_committed(committed) < n
                and not p.last_election_unclean
            ):
                raise Violation(
                    LEADER_COMPLETENESS,
                    f"leader {p.leader} of {key} epoch {p.leader_epoch} lacks committed "
                    f"offsets: log {lb.disk.log(key).records[:n]} vs committed {committed}",
                )
        for b in p.isr:
            sb = brokers[b]
            current = image.brokers.get(b)
            if not sb.up or current is None or sb.broker_epoch != current.broker_epoch:
                continue  # a crashed broker is fenced before it can lead again (§6.5.1)
            if p.last_election_unclean and unclean_allowed:
                continue
            u = self.unclean.get(b)
            restarted_unclean = u is not None and u.broker_epoch == current.broker_epoch
            if p.leader == NO_LEADER and restarted_unclean and key not in u.rejoined:
                # An offline partition keeps an unclean member listed only as a record
                # of who was last complete; it is no clean candidate (recovery aside).
                continue
            log = sb.disk.log(key)
            if log.match_committed(committed) < n:
                raise Violation(
                    LEADER_CANDIDATE_COMPLETENESS,
                    f"ISR member {b} of {key} (ISR {p.isr}, partition epoch "
                    f"{p.partition_epoch}) lacks committed offsets "
                    f"{log.matched}..{n - 1}: has {log.records[log.matched : n]} "
                    f"vs {committed[log.matched : n]}",
                )
            if (
                restarted_unclean
                and u is not None
                and key not in u.rejoined
                and p.leader != NO_LEADER  # an offline ISR only records who was last complete
            ):
                raise Violation(
                    UNCLEAN_EXCLUSION,
                    f"broker {b} registered unclean at epoch {u.broker_epoch} and is in the "
                    f"ISR of {key} without having rejoined it",
                )

    def _check_broker(self, b: SimBroker) -> None:
        for key, role in b.roles.items():
            log = b.disk.log(key)
            hw = role.high_watermark
            if hw > log.log_end_offset:
                raise Violation(LOG_MATCHING, f"broker {b.id} {key} hw {hw} > leo")
            if log.match_committed(self.committed[key]) < hw:
                raise Violation(
                    LOG_MATCHING,
                    f"broker {b.id} {key} local HW {hw} but its log matches the committed "
                    f"log only up to {log.matched}",
                )
            if isinstance(role, LeaderState) and not (
                set(role.maximal_isr) <= set(role.assignment)
            ):
                raise Violation(ISR_WITHIN_REPLICAS, f"broker {b.id} {key} {role.maximal_isr}")

    def final_check(self, leaders: dict[Key, SimLog | None]) -> None:
        """After the run settles: every acks=all record is on the leader, in order."""
        for key, acked in self.acked.items():
            log = leaders.get(key)
            if log is None:
                continue  # offline at the end: nothing to read (a liveness matter)
            for offset, record in sorted(acked.items()):
                if offset >= log.log_end_offset or log.records[offset] != record:
                    raise Violation(
                        ACKED_WRITES, f"acked record {record} at {key}@{offset} lost at the end"
                    )
