"""Eligible leader replicas (KIP-966): who keeps the committed log once the ISR is below min ISR."""

from __future__ import annotations


def test_members_removed_below_min_isr_join_the_elr_and_a_full_isr_clears_it(cluster):
    h = cluster(3)
    h.create("t", rf=3, min_insync_replicas=2)
    h.alter((1, 2))                       # 3 lags: ISR still at min ISR, nothing to remember
    assert (h.part().isr, h.part().elr) == ((1, 2), ())
    h.alter((1,))                         # below min ISR: 2 still holds everything committed
    assert (h.part().isr, h.part().elr) == ((1,), (2,))
    h.alter((1, 3))                       # back to min ISR: the ISR names the complete replicas again
    assert (h.part().isr, h.part().elr) == ((1, 3), ())


def test_a_fence_that_leaves_the_isr_below_min_isr_keeps_the_fenced_member_in_the_elr(cluster):
    h = cluster(3)
    h.create("t", rf=3, min_insync_replicas=2)
    h.alter((1, 2))
    h.pass_time(2_000, silent=(2,))       # 2's session expires: fenced out of the ISR
    p = h.part()
    assert p.isr == (1,) and p.elr == (2,) and p.leader == 1


def test_recovery_waits_for_the_elr_and_keeps_it_when_the_candidate_never_confirms(cluster):
    h = cluster(3)
    h.create("t", rf=3, min_insync_replicas=2)
    h.alter((1, 2))
    h.alter((1,))
    h.pass_time(2_000, silent=(1, 2, 3))  # everyone dies: offline with ISR (1,), ELR (2,)
    p = h.part()
    assert p.status == "offline" and p.isr == (1,) and p.elr == (2,)
    h.register(1, clean=False, leos={("t", 0): 10})
    assert h.part().status == "offline"   # 2 is last-known complete too: wait for it
    h.register(2, clean=False, leos={("t", 0): 12})
    p = h.part()
    assert (p.status, p.leader, p.isr, p.elr) == ("election", 2, (2,), (1,))  # the longer log
    h.pass_time(10_000, silent=(2,))      # 2 never takes up leadership: fenced
    p = h.part()
    assert p.status == "offline" and set(p.isr) | set(p.elr) == {1, 2}
    h.register(2, clean=False, leos={("t", 0): 12})
    h.confirm()
    assert (h.part().status, h.part().leader) == ("online", 2)
