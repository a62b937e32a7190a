"""Replica assignment: spread replicas and leaders over brokers and zones.

Greedy and deterministic, one partition at a time, against the load already
in the cluster (so a new topic fills the least-loaded brokers):

* the leader (first replica, the preferred leader) goes to the broker with the
  fewest leaders, then the least-led zone (relative to its size), then the
  fewest replicas;
* each further replica goes to a broker in a zone this partition does not use
  yet whenever one exists (a zone outage then costs at most one replica of a
  partition, TiKV/Kafka rack awareness), then the fewest replicas, then the
  *most* leaders (a broker with few leaders is about to lead and gain a
  replica that way; without this tie-break greedy placement drifts to a
  replica spread of 2), then the least-loaded zone.

Ties rotate with the partition number so equal brokers take turns. Brokers
without a zone (``None``) each count as a zone of their own, so a cluster
without zones is placed by load alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence


def assign_replicas(
    brokers: Sequence[int],
    partitions: int,
    rf: int,
    *,
    zones: Mapping[int, str | None] | None = None,
    replica_load: Mapping[int, int] | None = None,
    leader_load: Mapping[int, int] | None = None,
) -> list[list[int]]:
    """Replica lists for ``partitions`` partitions of ``rf`` replicas; leader first.

    ``brokers`` are the live brokers to place on (at least ``rf`` of them);
    ``zones`` maps broker id to zone (missing or ``None``: no zone);
    ``replica_load``/``leader_load`` are the replicas/leaders each broker
    already holds. Raises ``ValueError`` when ``rf`` exceeds the brokers.
    """
    order = sorted(set(brokers))
    n = len(order)
    if rf < 1 or rf > n:
        raise ValueError(f"replication factor {rf} needs 1..{n} brokers")
    zones = zones or {}
    zone_of = {b: zones.get(b) or f"\x00{b}" for b in order}
    zone_size = Counter(zone_of.values())
    replicas = Counter({b: (replica_load or {}).get(b, 0) for b in order})
    leaders = Counter({b: (leader_load or {}).get(b, 0) for b in order})
    zone_replicas: Counter[str] = Counter()
    zone_leaders: Counter[str] = Counter()
    for b in order:
        zone_replicas[zone_of[b]] += replicas[b]
        zone_leaders[zone_of[b]] += leaders[b]

    out: list[list[int]] = []
    for p in range(partitions):

        def turn(b: int, p: int = p) -> int:
            return (order.index(b) - p) % n

        leader = min(
            order,
            key=lambda b: (
                leaders[b],
                zone_leaders[zone_of[b]] / zone_size[zone_of[b]],
                replicas[b],
                turn(b),
            ),
        )
        chosen = [leader]
        used_zones = {zone_of[leader]}
        while len(chosen) < rf:
            follower = min(
                (b for b in order if b not in chosen),
                key=lambda b: (
                    zone_of[b] in used_zones,
                    replicas[b],
                    -leaders[b],
                    zone_replicas[zone_of[b]] / zone_size[zone_of[b]],
                    turn(b),
                ),
            )
            chosen.append(follower)
            used_zones.add(zone_of[follower])
        leaders[leader] += 1
        zone_leaders[zone_of[leader]] += 1
        for b in chosen:
            replicas[b] += 1
            zone_replicas[zone_of[b]] += 1
        out.append(chosen)
    return out
