"""Regression: unclean recovery must not lead from a last ISR smaller than min ISR.

Found by the deterministic simulator (``tests/sim``, seed 19 with
``flush_interval_ms=1000``): the ISR shrank to the leader alone (below min ISR
2), the leader lost its unflushed tail in a power loss and re-registered
unclean; unclean recovery made it leader again and committed records held by
the followers were lost (seed 001 §6.2, §6.8).
"""

from __future__ import annotations

from replication.controller.image import NO_LEADER, OFFLINE


def test_unclean_recovery_refuses_a_last_isr_below_min_isr(cluster):
    h = cluster(3)
    h.create("t", rf=3, min_insync_replicas=2)
    h.alter((1,))  # followers fell behind: ISR = leader alone, below min ISR
    h.pass_time(2_000, silent=(1,))  # the leader is fenced; ISR kept as last known
    assert h.part().status == OFFLINE and h.part().isr == (1,)
    h.register(1, clean=False, leos={("t", 0): 10})  # lost its unflushed tail
    p = h.part()
    assert p.leader == NO_LEADER and p.status == OFFLINE
    h.pass_time(5_000)
    assert h.part().status == OFFLINE


def test_unclean_recovery_still_works_when_the_last_isr_reaches_min_isr(cluster):
    h = cluster(3)
    h.create("t", rf=3, min_insync_replicas=2)
    h.alter((1, 2))
    h.pass_time(2_000, silent=(1, 2, 3))
    h.register(1, clean=False, leos={("t", 0): 40})
    assert h.part().status == OFFLINE
    h.register(2, clean=False, leos={("t", 0): 55})
    p = h.part()
    assert p.leader == 2 and p.isr == (2,)


def test_a_clean_restart_does_not_launder_an_unclean_last_isr_member(cluster):
    """Regression (tests/sim seed 235): the last ISR member lost its tail in a power
    loss, registered unclean (kept listed in the offline ISR), then shut down cleanly
    and came back: it must not become a clean candidate, it never caught up."""
    h = cluster(3)
    h.create("t", rf=3, min_insync_replicas=2)
    h.alter((1,))
    h.pass_time(2_000, silent=(1,))
    h.register(1, clean=False, leos={("t", 0): 10})
    assert h.part().status == OFFLINE
    h.pass_time(2_000, silent=(1,))  # fenced again
    h.register(1, clean=True, leos={("t", 0): 10})
    p = h.part()
    assert p.leader == NO_LEADER and p.status == OFFLINE
    assert h.image.brokers[1].clean is False


def test_a_clean_restart_after_catching_up_is_clean(cluster):
    h = cluster(3)
    h.create("t", rf=3)
    h.register(2, clean=False)  # unclean restart of a follower: leaves the ISR
    h.alter((1, 3, 2))  # caught up and re-added by the leader
    h.register(2, clean=True)
    assert h.image.brokers[2].clean is True
