"""The controller state machine: commands in, records out (sans-I/O).

``ControllerMachine`` validates a command against the current image and
returns the records that carry it out; it never mutates the image itself.
The caller commits the records through the metadata log and then applies
them (seed 001 §6.3 rule 2: commit before acting), one command at a time
(rule 3), before handing the machine its next command.

Besides the committed image the machine keeps the active controller's *soft
state* (``sessions.py``): broker sessions, reported LEOs, leader-suspect
reports and the deadlines of elections in progress. A newly active controller
calls :meth:`ControllerMachine.activate` to start it afresh.

Rules, in brief (each method cites its seed):

* A broker id holds one unfenced epoch at a time. Registering again while the
  previous epoch is unfenced first fences it, in the same decision (seed 001
  §6.5.1: the old epoch must be fenced before a new one is granted).
* Fencing removes the broker from every ISR and re-elects the partitions it
  led. When every ISR member is fenced, the ISR is left as it was: those are
  the last replicas known to hold the complete committed log and the only
  clean candidates when one returns (Kafka keeps the last ISR member likewise).
* A broker registering after an unclean shutdown is removed even from those
  last-standing ISRs (seed 001 §6.5.1 Unclean Exclusion). It re-enters an ISR
  only through the leader's AlterPartition naming its *current* broker epoch,
  which the leader sends once the replica provably caught up (seed 001 §6.5.1
  case 3, §6.5.3-6.5.4). That per-partition proof is what "caught up" means;
  ``BrokerMeta.clean`` keeps saying how the broker last started.
* Elections (seed 002): live ISR members, largest reported LEO first, then
  assignment order; the candidate must confirm within ``election_timeout_ms``
  or the next is tried; none left → offline. Unclean election only when the
  topic allows it, flagged ``last_election_unclean``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replication.controller import errors as E
from replication.controller import records as R
from replication.controller.assignment import assign_replicas
from replication.controller.changes import Batch
from replication.controller.commands import (
    AlterPartition,
    ConfirmLeadership,
    ControllerSettings,
    CreateTopic,
    LeaderSuspect,
    PutEntity,
)
from replication.controller.election import Candidates, rank_candidates, suspect_quorum
from replication.controller.errors import ControllerError
from replication.controller.image import (
    ELECTION,
    NO_LEADER,
    OFFLINE,
    ONLINE,
    BrokerMeta,
    MetadataImage,
    PartitionMeta,
)
from replication.controller.sessions import BrokerSessions, ReplicaProgress, SuspectReports

__all__ = [
    "AlterPartition",
    "ConfirmLeadership",
    "ControllerMachine",
    "ControllerSettings",
    "CreateTopic",
    "Decision",
    "LeaderSuspect",
    "assign_replicas",
    "validate_topic_name",
]


@dataclass(frozen=True, slots=True)
class Decision:
    """Records to commit, and whether the command was a no-op repeat (idempotent create).

    ``broker_epoch`` is the epoch a registration grants; -1 for other commands.
    An empty ``records`` list needs no commit.
    """

    records: list[R.Record]
    existed: bool = False
    broker_epoch: int = -1


@dataclass(slots=True)
class _PendingElection:
    """Soft state of one wait-for-response election (seed 002).

    Tagged with the leader epoch and candidate it was started for, so an entry
    from a decision that never committed, or that a later change superseded,
    is recognised and replaced rather than acted on.
    """

    leader_epoch: int
    candidate: int
    deadline_ms: int
    tried: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Offline:
    """When a partition went offline at ``leader_epoch`` (for ``offline_retry_ms``)."""

    leader_epoch: int
    since_ms: int


Key = tuple[str, int]

TOPIC_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
ENTITY_KIND_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
ENTITY_NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
"""Entity names follow topic names: an entity keyed by topic (a hook config) fits."""


class ControllerMachine:
    """Pure functions over a :class:`MetadataImage`, plus the active controller's soft state."""

    def __init__(self, image: MetadataImage, settings: ControllerSettings | None = None) -> None:
        self.image = image
        self.settings = settings or ControllerSettings()
        self.sessions = BrokerSessions(self.settings.session_timeout_ms)
        self.progress = ReplicaProgress()
        self.suspects = SuspectReports(self.settings.suspect_window_ms)
        self._pending: dict[Key, _PendingElection] = {}
        self._offline: dict[Key, _Offline] = {}

    # ------------------------------------------------------------------ life
    def activate(self, now_ms: int) -> None:
        """Start soft state afresh when this node becomes the active controller.

        Every registered broker gets a full session from ``now_ms`` (it may
        not have found the new controller yet); elections already in progress
        get a full ``election_timeout_ms`` from the first ``tick``.
        """
        self.sessions = BrokerSessions(self.settings.session_timeout_ms)
        self.progress = ReplicaProgress()
        self.suspects = SuspectReports(self.settings.suspect_window_ms)
        self._pending.clear()
        self._offline.clear()
        for b in self.image.brokers.values():
            self.sessions.track(b.broker_id, b.broker_epoch, now_ms)

    # ------------------------------------------------------------- brokers
    def register_broker(
        self,
        broker_id: int,
        url: str,
        zone: str | None,
        clean: bool,
        now_ms: int | None = None,
        log_end_offsets: Mapping[tuple[str, int], int] | None = None,
    ) -> Decision:
        """A (re-)registration always gets a new, cluster-wide monotonic broker epoch.

        If the broker's previous epoch is still unfenced it is fenced first in
        the same decision (seed 001 §6.5.1), with its ISR removals and
        re-elections. ``clean`` is False when the broker started without its
        clean-shutdown marker; it then leaves even last-standing ISRs. Offline
        partitions it can lead are re-elected (seed 002 "SPU comes back
        Online"). ``now_ms`` starts its session; ``None`` leaves that to the
        next ``tick``. ``log_end_offsets`` are the broker's LEOs as recovered
        at start; unclean recovery compares them.

        An unclean broker leaves the ISR of every partition that has a leader
        (Unclean Exclusion, seed 001 §6.5.1). In an offline partition it is one
        of the last-known complete members and stays listed: it
        is not a candidate for a clean election, but once *every* last-known
        ISR member is back the controller may recover the partition from the
        longest of their logs (seed 001 §6.8, KIP-966's balanced unclean
        recovery) rather than leave it offline for good.
        """
        if broker_id < 0:
            raise ControllerError(E.INVALID_REQUEST, "broker_id must be >= 0")
        if not url:
            raise ControllerError(E.INVALID_REQUEST, "a broker needs a URL")
        batch = Batch(self.image)
        self.progress.forget_broker(broker_id)  # its old LEOs may overstate what it kept
        for (topic, partition), leo in (log_end_offsets or {}).items():
            self.progress.report(broker_id, topic, partition, leo)
        old = self.image.brokers.get(broker_id)
        if old is not None and not old.fenced:
            self._fence(batch, [old], now_ms)
        if clean and old is not None and not old.clean and self._listed_offline(broker_id):
            # A clean shutdown does not restore what an earlier unclean one lost: while
            # it is still listed in an offline ISR only as a last-known member (it never
            # caught up since), it stays unclean, else a clean restart would launder it
            # into a clean candidate (seed 001 §6.2 "until it has recovered the data it
            # had lost"). Found by the simulator (tests/sim).
            clean = False
        epoch = self.image.last_broker_epoch + 1
        batch.add_broker_record(
            R.RegisterBrokerRecord(
                broker_id=broker_id, url=url, zone=zone, broker_epoch=epoch, clean=clean
            )
        )
        if not clean:
            for p in self._partitions_of(broker_id):
                v = batch.view(p.topic, p.partition)
                # Offline: nobody complete is serving; keep it as a last-known member.
                if broker_id in v.isr and v.status != OFFLINE:
                    w = batch.part(p.topic, p.partition)
                    self._set_isr(w, tuple(r for r in w.isr if r != broker_id))
        self._reelect_offline(batch, broker_id, now_ms)
        if now_ms is not None:
            self.sessions.track(broker_id, epoch, now_ms)
        return Decision(batch.records(), broker_epoch=epoch)

    def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        now_ms: int,
        log_end_offsets: Mapping[tuple[str, int], int] | None = None,
    ) -> Decision:
        """Keep the broker's session alive; unfence it if it was fenced (seed 001 §6.5.1).

        Not committed itself: an empty decision unless the broker was fenced,
        in which case an unfence record plus re-elections of offline
        partitions it can now lead. ``log_end_offsets`` maps (topic,
        partition) to this broker's LEO, the lag the controller elects by.
        Raises ``BROKER_NOT_REGISTERED`` for an unknown broker or an epoch the
        controller never granted, ``STALE_BROKER_EPOCH`` for a superseded one.
        """
        b = self._current_broker(broker_id, broker_epoch)
        self.sessions.heartbeat(broker_id, broker_epoch, now_ms)
        for (topic, partition), leo in (log_end_offsets or {}).items():
            self.progress.report(broker_id, topic, partition, leo)
        if not b.fenced:
            return Decision([])
        batch = Batch(self.image)
        batch.add_broker_record(R.UnfenceBrokerRecord(broker_id, broker_epoch))
        self._reelect_offline(batch, broker_id, now_ms)
        return Decision(batch.records())

    # -------------------------------------------------------------- topics
    def create_topic(self, cmd: CreateTopic) -> Decision:
        """Create a topic, or answer ``existed`` for an identical repeat (API.md idempotence).

        Replicas go on live brokers, spread over brokers and zones
        (``assignment.py``); the first replica leads at leader epoch 0 with the
        full replica set as ISR (seed 000: "at creation time, this is all of
        the replicas").
        """
        validate_topic_name(cmd.name)
        if cmd.partitions < 1 or cmd.partitions > 10_000:
            raise ControllerError(E.INVALID_REQUEST, "partitions must be between 1 and 10000")
        if cmd.replication_factor < 1:
            raise ControllerError("INVALID_REPLICATION_FACTOR", "replication_factor must be >= 1")
        cfg = cmd.config
        if cfg.min_insync_replicas < 1 or cfg.min_insync_replicas > cmd.replication_factor:
            raise ControllerError(
                "INVALID_CONFIG", "min_insync_replicas must be between 1 and replication_factor"
            )
        existing = self.image.topics.get(cmd.name)
        if existing is not None:
            same = (
                len(existing.partitions) == cmd.partitions
                and existing.replication_factor == cmd.replication_factor
                and existing.config == cmd.config
            )
            if same:
                return Decision([], existed=True)
            raise ControllerError("TOPIC_EXISTS", f"topic {cmd.name!r} exists with another spec")
        live = sorted(b.broker_id for b in self.image.brokers.values() if not b.fenced)
        if cmd.replication_factor > len(live):
            raise ControllerError(
                "INVALID_REPLICATION_FACTOR",
                f"replication_factor {cmd.replication_factor} exceeds {len(live)} live brokers",
            )
        replica_load: dict[int, int] = {}
        leader_load: dict[int, int] = {}
        for part in self.image.all_partitions():
            for r in part.replicas:
                replica_load[r] = replica_load.get(r, 0) + 1
            if part.replicas:
                leader_load[part.replicas[0]] = leader_load.get(part.replicas[0], 0) + 1
        assignment = assign_replicas(
            live,
            cmd.partitions,
            cmd.replication_factor,
            zones={b: self.image.brokers[b].zone for b in live},
            replica_load=replica_load,
            leader_load=leader_load,
        )
        recs: list[R.Record] = [
            R.TopicRecord(
                name=cmd.name,
                topic_id=_topic_id(self.image, cmd.name),
                replication_factor=cmd.replication_factor,
                config=cfg.to_dict(),
            )
        ]
        for p, replicas in enumerate(assignment):
            recs.append(
                R.PartitionRecord(
                    topic=cmd.name,
                    partition=p,
                    replicas=replicas,
                    isr=list(replicas),
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                    status=ONLINE,
                )
            )
        return Decision(recs)

    def delete_topic(self, name: str) -> Decision:
        """Remove a topic and forget its soft state; ``TOPIC_NOT_FOUND`` when absent.

        Entities bound to the topic (a value whose ``"topic"`` is ``name``: its
        hook config, subscriptions on it) go with it in the same decision, so a
        topic re-created under the same name starts with none of them.
        """
        topic = self.image.topics.get(name)
        if topic is None:
            raise ControllerError(E.TOPIC_NOT_FOUND, f"topic {name!r} does not exist")
        for p in topic.partitions:
            self._forget_partition((name, p.partition))
        self.progress.forget_topic(name)
        recs: list[R.Record] = [R.RemoveTopicRecord(name=name)]
        for kind in sorted(self.image.entities):
            for ename, value in sorted(self.image.entities[kind].items()):
                if value.get("topic") == name:
                    recs.append(R.EntityRecord(kind=kind, name=ename, value=None))
        return Decision(recs)

    # ------------------------------------------------------------ entities
    def put_entities(self, cmds: list[PutEntity]) -> Decision:
        """Set or delete configuration entities, all or none (one decision).

        Conditions are checked against the image *and* earlier writes of the
        same call, so a batch that creates then updates one name works. A write
        that changes nothing emits no record (``existed`` tells the caller when
        every write was such a repeat).
        """
        view: dict[tuple[str, str], dict[str, Any] | None] = {}
        recs: list[R.Record] = []
        for c in cmds:
            if not ENTITY_KIND_RE.match(c.kind) or not ENTITY_NAME_RE.match(c.name):
                raise ControllerError(E.INVALID_REQUEST, f"invalid entity {c.kind!r}/{c.name!r}")
            if c.expect not in (None, "absent", "present"):
                raise ControllerError(E.INVALID_REQUEST, f"invalid expect {c.expect!r}")
            key = (c.kind, c.name)
            current = view[key] if key in view else self.image.entity(c.kind, c.name)
            if c.expect == "absent" and current is not None and current != c.value:
                raise ControllerError(E.ENTITY_EXISTS, f"{c.kind} {c.name!r} already exists")
            if c.expect == "present" and current is None:
                raise ControllerError(E.ENTITY_NOT_FOUND, f"{c.kind} {c.name!r} does not exist")
            if current == c.value:
                continue
            view[key] = c.value
            recs.append(R.EntityRecord(kind=c.kind, name=c.name, value=c.value))
        return Decision(recs, existed=not recs and bool(cmds))

    # ---------------------------------------------------------- partitions
    def alter_partition(self, req: AlterPartition) -> Decision:
        """Validate and carry out a leader's ISR change (seed 001 §6.3 rule 4, §6.5).

        Refused with a stable code, in this order: the sender's broker epoch
        is stale or it is fenced (``STALE_BROKER_EPOCH``, ``BROKER_FENCED``);
        unknown partition; older/newer leader epoch (``FENCED_LEADER_EPOCH``,
        ``UNKNOWN_LEADER_EPOCH``); sender not the leader (``NOT_LEADER``);
        partition epoch differs (``INVALID_PARTITION_EPOCH``: the leader's
        view is stale, §6.3 rule 4); ISR empty, with duplicates, outside the
        replicas or without the leader (``INVALID_REQUEST``); an added member
        unknown, fenced, or named without its current broker epoch
        (``INELIGIBLE_REPLICA``, §6.5.1 case 3). A candidate still in
        ``election`` status that sends one has evidently taken up leadership,
        so the partition also goes ``online``. An unchanged ISR commits
        nothing (``existed``).
        """
        self._current_live_broker(req.broker_id, req.broker_epoch)
        p = self._partition(req.topic, req.partition)
        self._check_leader_epoch(p, req.leader_epoch)
        if req.broker_id != p.leader:
            raise ControllerError(
                E.NOT_LEADER, f"broker {req.broker_id} does not lead {p.topic}/{p.partition}"
            )
        if req.partition_epoch != p.partition_epoch:
            raise ControllerError(
                E.INVALID_PARTITION_EPOCH,
                f"partition epoch {req.partition_epoch} is not the current {p.partition_epoch}",
            )
        new_isr = tuple(req.new_isr)
        if not new_isr or len(set(new_isr)) != len(new_isr):
            raise ControllerError(E.INVALID_REQUEST, "the ISR must be non-empty without repeats")
        if not set(new_isr) <= set(p.replicas):
            raise ControllerError(E.INVALID_REQUEST, f"ISR {list(new_isr)} not within replicas")
        if p.leader not in new_isr:
            raise ControllerError(E.INVALID_REQUEST, "the ISR must contain the leader")
        for r in new_isr:
            given = req.broker_epochs.get(r)
            if r in p.isr and given is None:
                continue
            b = self.image.brokers.get(r)
            if b is None or b.fenced:
                raise ControllerError(E.INELIGIBLE_REPLICA, f"replica {r} is fenced or unknown")
            if given != b.broker_epoch:
                raise ControllerError(
                    E.INELIGIBLE_REPLICA,
                    f"replica {r} broker epoch {given} is not its current {b.broker_epoch}",
                )
        batch = Batch(self.image)
        w = batch.part(p.topic, p.partition)
        self._set_isr(w, new_isr)
        if w.status == ELECTION:
            w.status = ONLINE
            self._pending.pop((p.topic, p.partition), None)
        records = batch.records()
        return Decision(records, existed=not records)

    def confirm_leadership(self, cmd: ConfirmLeadership) -> Decision:
        """The candidate took up leadership: ``election`` → ``online`` (seed 002).

        Refused like AlterPartition when the epochs are stale or the sender
        is not the candidate; a repeat after ``online`` commits nothing.
        """
        self._current_live_broker(cmd.broker_id, cmd.broker_epoch)
        p = self._partition(cmd.topic, cmd.partition)
        self._check_leader_epoch(p, cmd.leader_epoch)
        if cmd.broker_id != p.leader:
            raise ControllerError(
                E.NOT_LEADER, f"broker {cmd.broker_id} is not the candidate of {p.topic}"
            )
        self._pending.pop((p.topic, p.partition), None)
        if p.status == ONLINE:
            return Decision([], existed=True)
        batch = Batch(self.image)
        batch.part(p.topic, p.partition).status = ONLINE
        return Decision(batch.records())

    def report_leader_suspect(self, req: LeaderSuspect, now_ms: int) -> Decision:
        """A follower suspects its leader (seed 000 "Partition Leader Failure").

        The report must come from a live replica at its current broker epoch,
        about the current leader epoch (``FENCED_LEADER_EPOCH`` when the
        leader already changed) and a partition epoch the controller has
        reached. When live ISR followers reporting within
        ``suspect_window_ms`` reach a majority of the ISR's followers
        (``election.suspect_quorum``), the leader leaves the ISR and the
        others elect among themselves; until then nothing is committed.
        """
        self._current_live_broker(req.broker_id, req.broker_epoch)
        p = self._partition(req.topic, req.partition)
        self._check_leader_epoch(p, req.leader_epoch)
        if req.partition_epoch > p.partition_epoch:
            raise ControllerError(
                E.INVALID_PARTITION_EPOCH,
                f"partition epoch {req.partition_epoch} is ahead of {p.partition_epoch}",
            )
        if req.broker_id not in p.replicas or req.broker_id == p.leader:
            raise ControllerError(E.INVALID_REQUEST, "only a follower replica may report")
        self.progress.report(req.broker_id, p.topic, p.partition, req.log_end_offset)
        if p.leader == NO_LEADER:
            return Decision([])
        reporters = self.suspects.add(p.topic, p.partition, p.leader_epoch, req.broker_id, now_ms)
        witnesses = {
            r for r in reporters if r in p.isr and r != p.leader and self.image.live_broker(r)
        }
        if len(witnesses) < suspect_quorum(len(p.isr)):
            return Decision([])
        batch = Batch(self.image)
        w = batch.part(p.topic, p.partition)
        deposed = w.leader
        self._set_isr(w, tuple(r for r in w.isr if r != deposed))
        self._elect(batch, w, now_ms, exclude={deposed})
        return Decision(batch.records())

    # ---------------------------------------------------------------- time
    def tick(self, now_ms: int) -> Decision:
        """Time-driven changes, batched into one decision.

        Fences brokers whose session expired (seed 001 §6.5.1); moves
        elections whose candidate did not confirm within
        ``election_timeout_ms`` to the next candidate (seed 002
        wait-for-response); retries offline partitions that have a live
        candidate again after ``offline_retry_ms``; finishes fences whose
        partition changes were not committed (a decision committed in part).
        Usually empty.
        """
        batch = Batch(self.image)
        expired: list[BrokerMeta] = []
        for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id):
            if self.sessions.broker_epoch(b.broker_id) < b.broker_epoch:
                # No session at the committed epoch yet: grant a full one from now.
                self.sessions.track(b.broker_id, b.broker_epoch, now_ms)
        for broker_id, epoch in self.sessions.expired(now_ms):
            gone = self.image.brokers.get(broker_id)
            if gone is not None and not gone.fenced and gone.broker_epoch == epoch:
                expired.append(gone)
        if expired:
            self._fence(batch, expired, now_ms)
        for p in self.image.all_partitions():
            key = (p.topic, p.partition)
            w = batch.view(*key)
            if w is not p:
                continue  # already decided in this batch (fencing)
            if p.leader != NO_LEADER and any(not batch.live(r) for r in p.isr):
                # Only after a decision was committed in part (the adapter splits
                # large decisions into several raft entries and a controller can
                # fail between them): finish the fence it started.
                w = batch.part(*key)
                self._set_isr(w, tuple(r for r in w.isr if batch.live(r)) or w.isr)
                if not batch.live(w.leader):
                    self._elect(batch, w, now_ms)
                continue
            if p.status == ELECTION:
                pend = self._pending.get(key)
                started_for = (p.leader_epoch, p.leader)
                if pend is None or (pend.leader_epoch, pend.candidate) != started_for:
                    # Unknown here (new controller, or a decision that never committed).
                    deadline = now_ms + self.settings.election_timeout_ms
                    self._pending[key] = _PendingElection(
                        p.leader_epoch, p.leader, deadline, {p.leader}
                    )
                elif now_ms >= pend.deadline_ms:
                    self._elect(batch, batch.part(*key), now_ms, exclude=pend.tried)
            elif p.status == OFFLINE:
                off = self._offline.get(key)
                if off is None or off.leader_epoch != p.leader_epoch:
                    off = self._offline[key] = _Offline(p.leader_epoch, now_ms)
                retry_due = now_ms - off.since_ms >= self.settings.offline_retry_ms
                if retry_due and self._has_candidate(batch, p):
                    self._elect(batch, batch.part(*key), now_ms)
        self._drop_superseded(self._pending, ELECTION)
        self._drop_superseded(self._offline, OFFLINE)
        self.suspects.prune(now_ms)
        return Decision(batch.records())

    # ------------------------------------------------------------- helpers
    def _fence(self, batch: Batch, brokers: list[BrokerMeta], now_ms: int | None = None) -> None:
        """Fence brokers: leave every ISR, re-elect what they led (seed 001 §6.5.1)."""
        ids = {b.broker_id for b in brokers}
        for b in brokers:
            batch.add_broker_record(R.FenceBrokerRecord(b.broker_id, b.broker_epoch))
        for p in self.image.all_partitions():
            if ids.isdisjoint(p.replicas):
                continue
            w = batch.part(p.topic, p.partition)
            remaining = tuple(r for r in w.isr if batch.live(r))
            if remaining:
                self._set_isr(w, remaining)
            # else: keep the last known complete replicas (see module docstring).
            if w.leader in ids:
                self._elect(batch, w, now_ms)

    def _elect(
        self,
        batch: Batch,
        w: PartitionMeta,
        now_ms: int | None,
        exclude: set[int] | None = None,
    ) -> None:
        """Choose the next leader of working copy ``w`` (seed 002; seed 001 §6.5).

        Clean candidates first; unclean ones only when the topic allows it and
        no ISR member is alive, which also resets the ISR to the new leader alone (it is the only
        replica known to hold what will now be the log). No candidate:
        ``offline``. Any outcome is a leader change: the leader epoch moves
        once per decision.
        """
        key = (w.topic, w.partition)
        base = self.image.partition(*key)
        assert base is not None
        tried = set(exclude or ())
        topic = self.image.topics[w.topic]
        cands = rank_candidates(
            w.replicas,
            w.isr,
            live=batch.live,
            clean_broker=batch.broker_clean,
            leo=lambda b: self.progress.leo(w.topic, w.partition, b),
            exclude=tried,
        )
        clean = self._eligible_clean(batch, w, cands)
        recovery = None if clean else self._recovery_candidate(batch, w, tried)
        w.leader_epoch = base.leader_epoch + 1
        self.suspects.clear(*key)
        live_isr = tuple(r for r in w.isr if batch.live(r))
        if clean:
            w.leader = clean[0]
            # An offline partition kept unclean restarts listed only as last-known members
            # (register_broker); a clean leader ends that: they may lack committed records
            # (a lossy shutdown), so they leave the ISR and are not eligible (Unclean
            # Exclusion, seed 001 §6.5.1) until they catch up and rejoin. Found by the
            # simulator's soak (seed 100506).
            unclean = {r for r in live_isr if not batch.broker_clean(r)} if w.status == OFFLINE else set()
            self._set_isr(w, tuple(r for r in live_isr if r not in unclean))
            w.elr = tuple(r for r in w.elr if r not in unclean)
            w.last_election_unclean = False
        elif recovery is not None:
            # Every last-known complete replica restarted uncleanly: lead from the
            # longest of their logs (seed 001 §6.8). Not an unclean *election*: no
            # replica outside the last ISR is chosen.
            # The others stay last-known (ELR) until the ISR is back to min ISR: if
            # this candidate never takes up leadership, recovery can try again.
            w.elr = tuple(r for r in w.replicas if r != recovery and (r in w.isr or r in w.elr))
            w.leader = recovery
            w.isr = (recovery,)
            w.last_election_unclean = False
        elif cands.unclean and topic.config.unclean_leader_election and not live_isr:
            # Only when no in-sync replica is alive at all: live ISR members that
            # merely failed to confirm in time are retried later, never skipped
            # in favour of a replica that may lack committed records.
            w.leader = cands.unclean[0]
            w.isr = (w.leader,)
            w.elr = ()
            w.last_election_unclean = True
        else:
            w.leader = NO_LEADER
            w.status = OFFLINE
            self._pending.pop(key, None)
            if now_ms is not None:
                self._offline[key] = _Offline(w.leader_epoch, now_ms)
            return
        w.status = ELECTION
        self._offline.pop(key, None)
        if now_ms is None:
            # Time unknown (registration without now_ms): the next tick starts the timer.
            self._pending.pop(key, None)
            return
        deadline = now_ms + self.settings.election_timeout_ms
        self._pending[key] = _PendingElection(
            w.leader_epoch, w.leader, deadline, tried | {w.leader}
        )

    def _reelect_offline(self, batch: Batch, broker_id: int, now_ms: int | None) -> None:
        """An eligible replica came back: elect its offline partitions (seed 002)."""
        for p in self._partitions_of(broker_id):
            w = batch.view(p.topic, p.partition)
            if w.status == OFFLINE and self._has_candidate(batch, w):
                self._elect(batch, batch.part(p.topic, p.partition), now_ms)

    def _has_candidate(self, batch: Batch, p: PartitionMeta) -> bool:
        cands = rank_candidates(
            p.replicas,
            p.isr,
            live=batch.live,
            clean_broker=batch.broker_clean,
            leo=lambda b: -1,
        )
        allow_unclean = self.image.topics[p.topic].config.unclean_leader_election
        if self._eligible_clean(batch, p, cands):
            return True
        if self._recovery_candidate(batch, p, set()) is not None:
            return True
        live_isr = any(batch.live(r) for r in p.isr)
        return allow_unclean and bool(cands.unclean) and not live_isr

    @staticmethod
    def _eligible_clean(batch: Batch, w: PartitionMeta, cands: Candidates) -> tuple[int, ...]:
        """Clean candidates, minus unclean restarts left in an offline partition's ISR.

        Such a member was kept only as a record of who was last complete
        (see ``register_broker``); it may have lost its tail, so it leads
        only through recovery.
        """
        if w.status != OFFLINE:
            return cands.clean
        return tuple(b for b in cands.clean if batch.broker_clean(b))

    def _recovery_candidate(self, batch: Batch, w: PartitionMeta, tried: set[int]) -> int | None:
        """The longest log among the last ISR once all of it is back, else None (seed 001 §6.8).

        With several members every LEO must have been reported (at
        registration or in heartbeats): choosing blind could pick the member
        that lost the most.

        Only a last ISR of at least ``min_insync_replicas`` members qualifies:
        the guarantee is "no loss with up to min ISR - 1 lossy shutdowns"
        (§6.2, §6.8: LastKnownELR is MinISR in size). An ISR that shrank below
        min ISR no longer names every complete replica (the removed members
        that Kafka keeps in the ELR also hold the committed log), so one lossy
        restart of its last member would lose committed records; such a
        partition stays offline. Found by the simulator (``tests/sim``).
        """
        last_known = (*w.isr, *w.elr)
        members = [b for b in last_known if b not in tried]
        if w.status != OFFLINE or not members or len(members) != len(last_known):
            return None
        if len(last_known) < self.image.topics[w.topic].config.min_insync_replicas:
            return None
        if not all(batch.live(b) for b in members):
            return None
        leos = {b: self.progress.leo(w.topic, w.partition, b) for b in members}
        if len(members) > 1 and any(v < 0 for v in leos.values()):
            return None
        order = {b: i for i, b in enumerate(w.replicas)}
        return max(members, key=lambda b: (leos[b], -order[b]))

    def _listed_offline(self, broker_id: int) -> bool:
        """Whether the broker is in the kept ISR or the ELR of some offline partition."""
        return any(
            (broker_id in p.isr or broker_id in p.elr) and p.status == OFFLINE
            for p in self._partitions_of(broker_id)
        )

    def _set_isr(self, w: PartitionMeta, isr: tuple[int, ...]) -> None:
        """Change a working copy's ISR, keeping the ELR (KIP-966) in step.

        Members removed while the new ISR is below ``min_insync_replicas`` join
        the ELR: from then on the HW cannot advance (it needs min ISR
        members), so they keep holding the whole committed log, and a later
        recovery must wait for them too. Without it a whole-cluster crash
        whose restarts each shrank the ISR by one (the fault suite's
        ``kill-all``) left a last ISR too small to recover from, offline for
        good. Members back in the ISR leave the ELR; an ISR at min ISR or
        more empties it (the ISR alone names the complete replicas again).
        """
        min_isr = self.image.topics[w.topic].config.min_insync_replicas
        removed = [r for r in w.isr if r not in isr]
        elr = set(w.elr)
        if len(isr) >= min_isr:
            elr.clear()
        else:
            elr |= set(removed)
        elr -= set(isr)
        w.isr = isr
        w.elr = tuple(r for r in w.replicas if r in elr)

    def _partitions_of(self, broker_id: int) -> list[PartitionMeta]:
        return [p for p in self.image.all_partitions() if broker_id in p.replicas]

    def _drop_superseded(self, entries: dict[Key, Any], status: str) -> None:
        """Forget timers the committed image has moved past.

        An entry tagged with a leader epoch *ahead* of the image belongs to a
        decision not yet applied and is kept; one at the image's epoch is kept
        only while the partition is still in ``status``.
        """
        for key in list(entries):
            p = self.image.partition(*key)
            epoch = entries[key].leader_epoch
            if (
                p is None
                or epoch < p.leader_epoch
                or (epoch == p.leader_epoch and p.status != status)
            ):
                del entries[key]

    def _forget_partition(self, key: Key) -> None:
        self._pending.pop(key, None)
        self._offline.pop(key, None)
        self.suspects.clear(*key)

    def _current_broker(self, broker_id: int, broker_epoch: int) -> BrokerMeta:
        b = self.image.brokers.get(broker_id)
        if b is None or broker_epoch > b.broker_epoch:
            raise ControllerError(
                E.BROKER_NOT_REGISTERED,
                f"broker {broker_id} epoch {broker_epoch} is not registered",
            )
        if broker_epoch < b.broker_epoch:
            raise ControllerError(
                E.STALE_BROKER_EPOCH,
                f"broker {broker_id} epoch {broker_epoch} superseded by {b.broker_epoch}",
            )
        return b

    def _current_live_broker(self, broker_id: int, broker_epoch: int) -> BrokerMeta:
        b = self._current_broker(broker_id, broker_epoch)
        if b.fenced:
            raise ControllerError(E.BROKER_FENCED, f"broker {broker_id} is fenced")
        return b

    def _partition(self, topic: str, partition: int) -> PartitionMeta:
        if topic not in self.image.topics:
            raise ControllerError(E.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
        p = self.image.partition(topic, partition)
        if p is None:
            raise ControllerError(E.PARTITION_NOT_FOUND, f"no partition {topic}/{partition}")
        return p

    @staticmethod
    def _check_leader_epoch(p: PartitionMeta, leader_epoch: int) -> None:
        if leader_epoch < p.leader_epoch:
            raise ControllerError(
                E.FENCED_LEADER_EPOCH,
                f"leader epoch {leader_epoch} is older than {p.leader_epoch}",
            )
        if leader_epoch > p.leader_epoch:
            raise ControllerError(
                E.UNKNOWN_LEADER_EPOCH,
                f"leader epoch {leader_epoch} is newer than {p.leader_epoch}",
            )


def validate_topic_name(name: str, *, allow_internal: bool = False) -> None:
    """API.md name rules; ``__``-prefixed names are reserved for tidelog itself."""
    if not TOPIC_NAME_RE.match(name) or name in (".", ".."):
        raise ControllerError("INVALID_TOPIC_NAME", f"invalid topic name {name!r}")
    if name.startswith("__") and not allow_internal:
        raise ControllerError(
            "INVALID_TOPIC_NAME", f"topic names starting with '__' are reserved: {name!r}"
        )


def _topic_id(image: MetadataImage, name: str) -> str:
    """A topic id unique in this metadata history, derived without randomness.

    Deterministic so the same command sequence yields the same records (the
    simulator replays from a seed); distinct because the version is.
    """
    digest = hashlib.sha256(f"{image.cluster_id}/{image.version}/{name}".encode())
    return digest.hexdigest()[:32]
