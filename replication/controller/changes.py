"""A decision under construction: working copies over the image, then records.

Several rules can touch one partition in a single decision (two brokers
fenced in the same tick, a fence followed by the registration that caused
it). Rules edit working copies here; ``records()`` then emits broker records
followed by at most *one* ``PartitionChangeRecord`` per partition, holding the
final values, so the partition epoch moves once per committed change and a
broker applying the delta never sees an intermediate state.
"""

from __future__ import annotations

from dataclasses import replace

from replication.controller import records as R
from replication.controller.image import NO_LEADER, MetadataImage, PartitionMeta


class Batch:
    """Working state of one decision; the image itself is never touched."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.broker_records: list[R.Record] = []
        self._fenced: dict[int, bool] = {}
        self._epoch: dict[int, int] = {}
        self._clean: dict[int, bool] = {}
        self._parts: dict[tuple[str, int], PartitionMeta] = {}

    # -- brokers -----------------------------------------------------------
    def add_broker_record(self, record: R.Record) -> None:
        """Queue a broker record and reflect it in this batch's view of brokers."""
        self.broker_records.append(record)
        match record:
            case R.FenceBrokerRecord():
                self._fenced[record.broker_id] = True
            case R.UnfenceBrokerRecord():
                self._fenced[record.broker_id] = False
            case R.RegisterBrokerRecord():
                self._fenced[record.broker_id] = False
                self._epoch[record.broker_id] = record.broker_epoch
                self._clean[record.broker_id] = record.clean

    def live(self, broker_id: int) -> bool:
        """Registered and unfenced, as of this batch."""
        if broker_id in self._fenced:
            return not self._fenced[broker_id]
        return self.image.live_broker(broker_id)

    def broker_clean(self, broker_id: int) -> bool:
        """Whether its current registration followed a clean shutdown (False if unknown)."""
        if broker_id in self._clean:
            return self._clean[broker_id]
        b = self.image.brokers.get(broker_id)
        return b is not None and b.clean

    # -- partitions --------------------------------------------------------
    def part(self, topic: str, partition: int) -> PartitionMeta:
        """The working copy of a partition (created from the image on first use)."""
        key = (topic, partition)
        p = self._parts.get(key)
        if p is None:
            base = self.image.partition(topic, partition)
            if base is None:
                raise KeyError(key)
            p = self._parts[key] = replace(base)
        return p

    def view(self, topic: str, partition: int) -> PartitionMeta:
        """The working copy if touched, else the image's partition (read-only use)."""
        p = self._parts.get((topic, partition))
        if p is not None:
            return p
        base = self.image.partition(topic, partition)
        if base is None:
            raise KeyError((topic, partition))
        return base

    def records(self) -> list[R.Record]:
        out = list(self.broker_records)
        for (topic, partition), new in sorted(self._parts.items()):
            old = self.image.partition(topic, partition)
            assert old is not None, "partition vanished during a decision"
            change = diff(old, new)
            if change is not None:
                out.append(change)
        return out


def diff(old: PartitionMeta, new: PartitionMeta) -> R.PartitionChangeRecord | None:
    """The change record taking ``old`` to ``new``; ``None`` when nothing changed.

    Enforces the epoch rules rather than trusting callers: a leader change
    always bumps the leader epoch by exactly one (seed 001 §6.3), and the
    record names the partition epoch it produces.
    """
    if _state(new) == _state(old):
        return None
    assert set(new.isr) <= set(new.replicas), f"ISR {new.isr} not within {new.replicas}"
    assert set(new.elr) <= set(new.replicas) and not set(new.elr) & set(new.isr), f"ELR {new.elr}"
    assert new.leader == NO_LEADER or new.leader in new.isr, "leader outside the ISR"
    assert (new.leader == NO_LEADER) == (new.status == "offline"), "leader/status mismatch"
    leader_epoch = new.leader_epoch
    if new.leader != old.leader:
        leader_epoch = old.leader_epoch + 1
    assert leader_epoch in (old.leader_epoch, old.leader_epoch + 1), "leader epoch jump"
    return R.PartitionChangeRecord(
        topic=new.topic,
        partition=new.partition,
        isr=list(new.isr) if new.isr != old.isr else None,
        replicas=list(new.replicas) if new.replicas != old.replicas else None,
        leader=new.leader if new.leader != old.leader else None,
        leader_epoch=leader_epoch if leader_epoch != old.leader_epoch else None,
        status=new.status if new.status != old.status else None,
        last_election_unclean=(
            new.last_election_unclean
            if new.last_election_unclean != old.last_election_unclean
            else None
        ),
        partition_epoch=old.partition_epoch + 1,
        elr=list(new.elr) if new.elr != old.elr else None,
    )


def _state(p: PartitionMeta) -> tuple[object, ...]:
    """The fields a change record can carry (everything but identity and partition epoch)."""
    return (p.isr, p.replicas, p.leader, p.leader_epoch, p.status, p.last_election_unclean, p.elr)
