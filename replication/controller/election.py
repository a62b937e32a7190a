"""Leader election rules (ARCHITECTURE.md "Replication protocol"; seeds 000, 001 §6.5, 002).

Pure functions over plain values; the machine supplies liveness, cleanliness
and reported LEOs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidates:
    """Eligible leaders, best first.

    ``clean``: live ISR members. Every ISR member hosts the complete committed
    log (seed 001 §6.5 Leader Candidate Completeness), so any of them may lead
    without losing committed records.
    ``unclean``: live replicas outside the ISR, for topics that allow unclean
    election only; they may lack committed records (data loss).
    """

    clean: tuple[int, ...]
    unclean: tuple[int, ...]


def rank_candidates(
    replicas: Sequence[int],
    isr: Collection[int],
    *,
    live: Callable[[int], bool],
    clean_broker: Callable[[int], bool],
    leo: Callable[[int], int],
    exclude: Collection[int] = (),
) -> Candidates:
    """Order candidates: smallest lag first, then assignment order (seed 002).

    Lag is measured by the reported LEO (``leo`` returns -1 when unknown): the
    largest LEO is the smallest lag behind the previous leader, and an unknown
    LEO ranks after every known one. Unclean candidates additionally prefer
    brokers that registered after a clean shutdown: a broker that lost its
    tail (seed 001 §6.2) is the last resort even among out-of-sync replicas.
    ``exclude`` removes candidates already tried in this election.
    """
    position = {b: i for i, b in enumerate(replicas)}

    def by_lag(b: int) -> tuple[bool, int, int]:
        reported = leo(b)
        return (reported < 0, -reported, position[b])

    pool = [b for b in replicas if live(b) and b not in exclude]
    clean = sorted((b for b in pool if b in isr), key=by_lag)
    unclean = sorted(
        (b for b in pool if b not in isr), key=lambda b: (not clean_broker(b), *by_lag(b))
    )
    return Candidates(tuple(clean), tuple(unclean))


def suspect_quorum(isr_size: int) -> int:
    """Reports needed to depose a leader: a majority of the ISR's followers.

    Liftbridge counts the ISR minus the leader and asks for more than half of
    it (seed 000/003 "Partition Leader Failure"): ISR 3 → 2 reports, ISR 2 → 1.
    An ISR of the leader alone has nobody to report; only fencing moves it.
    """
    followers = max(isr_size - 1, 0)
    return followers // 2 + 1
