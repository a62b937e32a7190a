"""Soft state of the active controller: broker sessions, reported LEOs, suspect reports.

None of this is committed. Heartbeats arrive every few hundred milliseconds
per broker; committing each would flood the metadata log, so (like KRaft) only
their *consequences* are committed: a fence record when a session expires, an
unfence record when a fenced broker's heartbeat arrives. A new active
controller starts with empty soft state and gives every registered broker a
full session timeout to reach it (``ControllerMachine.activate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replication.controller import errors as E
from replication.controller.errors import ControllerError


@dataclass(slots=True)
class _Session:
    broker_epoch: int
    last_heartbeat_ms: int


class BrokerSessions:
    """Last heartbeat per broker at its newest known epoch (seed 001 §6.5.1).

    A session *expires* once ``now_ms - last_heartbeat_ms >= session_timeout_ms``.
    """

    def __init__(self, session_timeout_ms: int) -> None:
        if session_timeout_ms <= 0:
            raise ValueError("session_timeout_ms must be positive")
        self.session_timeout_ms = session_timeout_ms
        self._sessions: dict[int, _Session] = {}

    def track(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """Start (or restart) a session, as if a heartbeat arrived at ``now_ms``.

        Used on registration and when a controller becomes active; a session
        at an older epoch is replaced.
        """
        self._sessions[broker_id] = _Session(broker_epoch, now_ms)

    def heartbeat(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """Record a heartbeat; a stale epoch raises ``STALE_BROKER_EPOCH``.

        A newer epoch than tracked replaces the session (the registration that
        granted it was committed after this tracker last heard of the broker).
        Time never goes backwards here: an older ``now_ms`` keeps the newer one.
        """
        s = self._sessions.get(broker_id)
        if s is not None and broker_epoch < s.broker_epoch:
            raise ControllerError(
                E.STALE_BROKER_EPOCH,
                f"broker {broker_id} epoch {broker_epoch} superseded by {s.broker_epoch}",
            )
        if s is None or broker_epoch > s.broker_epoch:
            self._sessions[broker_id] = _Session(broker_epoch, now_ms)
        else:
            s.last_heartbeat_ms = max(s.last_heartbeat_ms, now_ms)

    def expired(self, now_ms: int) -> list[tuple[int, int]]:
        """``(broker_id, broker_epoch)`` of every expired session, by broker id.

        Expired sessions stay tracked (a fenced broker may still heartbeat and
        be unfenced); the caller ignores those already fenced.
        """
        return sorted(
            (b, s.broker_epoch)
            for b, s in self._sessions.items()
            if now_ms - s.last_heartbeat_ms >= self.session_timeout_ms
        )

    def is_tracked(self, broker_id: int) -> bool:
        return broker_id in self._sessions

    def broker_epoch(self, broker_id: int) -> int:
        """The tracked epoch; -1 when the broker has no session."""
        s = self._sessions.get(broker_id)
        return -1 if s is None else s.broker_epoch

    def last_heartbeat_ms(self, broker_id: int) -> int:
        """When the last heartbeat (or registration) arrived; -1 when never."""
        s = self._sessions.get(broker_id)
        return -1 if s is None else s.last_heartbeat_ms

    def forget(self, broker_id: int) -> None:
        self._sessions.pop(broker_id, None)


class ReplicaProgress:
    """Brokers' reported log end offsets, the controller's measure of lag.

    Lag reaches the controller in two ways: every heartbeat may carry the
    broker's LEO for the partitions it hosts (only changed ones need be sent;
    omitted partitions keep their last value), and every leader-suspect report
    carries the reporter's LEO. Election prefers the candidate with the largest
    LEO, i.e. the smallest lag behind the previous leader (seed 002). A
    registration forgets the broker's LEOs: after an unclean restart its old
    LEOs overstate what it still has.
    """

    def __init__(self) -> None:
        self._leos: dict[tuple[str, int], dict[int, int]] = {}

    def report(self, broker_id: int, topic: str, partition: int, log_end_offset: int) -> None:
        if log_end_offset < 0:
            return
        self._leos.setdefault((topic, partition), {})[broker_id] = log_end_offset

    def leo(self, topic: str, partition: int, broker_id: int) -> int:
        """Last reported LEO; -1 when unknown."""
        return self._leos.get((topic, partition), {}).get(broker_id, -1)

    def forget_broker(self, broker_id: int) -> None:
        for leos in self._leos.values():
            leos.pop(broker_id, None)

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._leos if k[0] == topic]:
            del self._leos[key]


@dataclass(slots=True)
class _Reports:
    leader_epoch: int
    at_ms: dict[int, int] = field(default_factory=dict)


class SuspectReports:
    """Followers' leader-suspect reports per partition (seed 000 "Partition Leader Failure").

    Reports are soft state, repeated by followers every ``leader_timeout_ms``
    while the suspicion lasts, so a controller failover loses at most one
    round of them. (Liftbridge commits them through Raft instead; repeating is
    cheaper and converges the same way.) Reports about another leader epoch
    than the latest one seen for the partition are dropped.
    """

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self._reports: dict[tuple[str, int], _Reports] = {}

    def add(
        self, topic: str, partition: int, leader_epoch: int, broker_id: int, now_ms: int
    ) -> set[int]:
        """Record a report; return the reporters whose reports are within the window."""
        key = (topic, partition)
        r = self._reports.get(key)
        if r is None or r.leader_epoch != leader_epoch:
            r = self._reports[key] = _Reports(leader_epoch)
        r.at_ms[broker_id] = max(r.at_ms.get(broker_id, now_ms), now_ms)
        return {b for b, t in r.at_ms.items() if now_ms - t < self.window_ms}

    def clear(self, topic: str, partition: int) -> None:
        self._reports.pop((topic, partition), None)

    def prune(self, now_ms: int) -> None:
        """Drop reports older than the window (keeps the tracker bounded)."""
        for key in list(self._reports):
            r = self._reports[key]
            r.at_ms = {b: t for b, t in r.at_ms.items() if now_ms - t < self.window_ms}
            if not r.at_ms:
                del self._reports[key]
