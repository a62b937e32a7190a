"""What the fault suite found, reduced to the controller state machine so it replays exactly.

Finding 1 (liveness, data safe; fixed): ``kill -9`` of every node at once (the
``kill-all`` fault; ``python -m tests.fault --scenario kill-all``) used to
leave every partition offline for good. The nodes restart within the session
timeout, so each re-registers (unclean) while the others' *old* incarnations
are still unfenced. Registration fences the broker's old epoch and strips the
unclean broker from the ISR (Unclean Exclusion, seed 001 §6.5.1), so the ISR
shrank one member per registration: ``{1,2,3} -> {2,3} -> {3}``, and the
partition went offline with a last-known ISR of one member, below
``min_insync_replicas`` (2), from which unclean recovery refuses to lead
(seed 001 §6.8: the last-known ELR is MinISR in size).

The fix is KIP-966's eligible leader replicas: members removed while the ISR
is below min ISR are kept in ``PartitionMeta.elr`` (the HW cannot advance
without min ISR members, so they still hold the committed log), and recovery
waits for, and chooses among, ISR and ELR together. A recovery candidate that
never takes up leadership leaves the others in the ELR, so the next attempt
still has them. The harness below confirms leadership like a live broker
does; without confirmations no election can finish.
"""

from __future__ import annotations

import pytest

from replication.controller.image import ELECTION, OFFLINE, MetadataImage, TopicConfig
from replication.controller.machine import (
    ConfirmLeadership,
    ControllerMachine,
    ControllerSettings,
    CreateTopic,
    Decision,
)

SETTINGS = ControllerSettings(session_timeout_ms=3_000, election_timeout_ms=3_000, suspect_window_ms=2_000,
                              offline_retry_ms=3_000)


class Controller:
    """The controller machine with every decision applied at once, as if committed by raft."""

    def __init__(self) -> None:
        self.image = MetadataImage(cluster_id="c")
        self.m = ControllerMachine(self.image, SETTINGS)
        self.now_ms = 0
        self.epochs: dict[int, int] = {}

    def commit(self, d: Decision) -> Decision:
        for rec in d.records:
            self.image.apply(rec)
        return d

    def register(self, broker: int, clean: bool, leo: int = 0) -> None:
        d = self.commit(self.m.register_broker(broker, f"http://b{broker}", None, clean, self.now_ms,
                                               {("t", 0): leo}))
        assert d.broker_epoch is not None
        self.epochs[broker] = d.broker_epoch

    def run(self, ms: int) -> None:
        """Every current incarnation heartbeats each 100 ms and, as a live broker does, takes
        up a leadership it was chosen for; the controller ticks."""
        for _ in range(ms // 100):
            self.now_ms += 100
            for b, e in self.epochs.items():
                self.commit(self.m.heartbeat(b, e, self.now_ms, {("t", 0): 100}))
            p = self.image.partition("t", 0)
            if p is not None and p.status == ELECTION and p.leader in self.epochs:
                self.commit(self.m.confirm_leadership(ConfirmLeadership(
                    p.leader, self.epochs[p.leader], "t", 0, p.leader_epoch)))
            self.commit(self.m.tick(self.now_ms))


@pytest.mark.parametrize("order", [(3, 1, 2), (1, 2, 3)])
def test_every_broker_killed_at_once_and_restarted_within_the_session_timeout_comes_back(
    order: tuple[int, int, int],
) -> None:
    c = Controller()
    for b in (1, 2, 3):
        c.register(b, clean=True)
    c.commit(c.m.create_topic(CreateTopic("t", 1, 3, TopicConfig(min_insync_replicas=2))))
    c.run(1_000)
    # kill -9 of all three; each restarts (unclean, its log intact: LEO 100) before any session expires
    for b in order:
        c.register(b, clean=False, leo=100)
    c.run(30_000)  # sessions, election timeouts and offline retries all have time to act
    p = c.image.partition("t", 0)
    assert p is not None
    assert p.status == "online", f"{p.status} with last ISR {p.isr}, ELR {p.elr} (min ISR 2)"


def test_the_same_crash_recovers_when_the_old_sessions_expire_before_the_restarts() -> None:
    """The control case: fenced first, the last ISR stays {1,2,3} and unclean recovery leads."""
    c = Controller()
    for b in (1, 2, 3):
        c.register(b, clean=True)
    c.commit(c.m.create_topic(CreateTopic("t", 1, 3, TopicConfig(min_insync_replicas=2))))
    c.run(1_000)
    c.epochs.clear()  # nobody heartbeats: every session expires
    c.run(5_000)
    p = c.image.partition("t", 0)
    assert p is not None and p.status == OFFLINE and set(p.isr) == {1, 2, 3}
    for b in (3, 1, 2):
        c.register(b, clean=False, leo=100)
    c.run(1_000)
    p = c.image.partition("t", 0)
    assert p is not None and p.status != OFFLINE
