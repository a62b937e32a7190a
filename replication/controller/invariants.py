"""Invariants of a metadata image, for tests and the simulator (STYLE.md: assert invariants)."""

from __future__ import annotations

from replication.controller.image import NO_LEADER, OFFLINE, STATUSES, MetadataImage


def violations(image: MetadataImage) -> list[str]:
    """Every broken invariant as a readable sentence; ``[]`` when the image is sound."""
    out: list[str] = []
    epochs = [b.broker_epoch for b in image.brokers.values()]
    if len(set(epochs)) != len(epochs):
        out.append(f"broker epochs not unique: {sorted(epochs)}")
    if epochs and max(epochs) > image.last_broker_epoch:
        out.append("a broker epoch exceeds last_broker_epoch")
    for t in image.topics.values():
        for i, p in enumerate(t.partitions):
            name = f"{t.name}/{i}"
            if p.partition != i:
                out.append(f"{name}: numbered {p.partition}")
            if len(p.replicas) != t.replication_factor or len(set(p.replicas)) != len(p.replicas):
                out.append(f"{name}: replicas {p.replicas} for rf {t.replication_factor}")
            if not set(p.isr) <= set(p.replicas):
                out.append(f"{name}: ISR {p.isr} not within replicas {p.replicas}")
            if not set(p.elr) <= set(p.replicas) or set(p.elr) & set(p.isr):
                out.append(f"{name}: ELR {p.elr} not within replicas or overlapping ISR {p.isr}")
            if p.status not in STATUSES:
                out.append(f"{name}: unknown status {p.status!r}")
            if (p.leader == NO_LEADER) != (p.status == OFFLINE):
                out.append(f"{name}: leader {p.leader} with status {p.status}")
            if p.leader != NO_LEADER:
                if p.leader not in p.isr:
                    out.append(f"{name}: leader {p.leader} outside ISR {p.isr}")
                if not image.live_broker(p.leader):
                    out.append(f"{name}: leader {p.leader} is fenced or unknown")
            fenced = [r for r in p.isr if not image.live_broker(r)]
            if fenced and p.leader != NO_LEADER:
                out.append(f"{name}: fenced {fenced} in the ISR of a led partition")
            if fenced and len(fenced) != len(p.isr) and p.status != OFFLINE:
                # An offline partition keeps its last ISR while members come back
                # uncleanly one by one, until all are back (unclean recovery).
                out.append(f"{name}: ISR {p.isr} mixes live and fenced members")
    return out
