"""The metadata image as key-value entries, for a key-value consensus log.

raftos replicates key updates, not a record log, so the controller commits
each decision as the *absolute* new values of the keys its records touched
(plus ``meta``). Any voter rebuilds the exact image from the key-value state,
and the log can be compacted to the current values without losing anything
(a record log would need replay from the start).

Keys: ``meta`` (cluster id, version, last broker epoch), ``b/<id>`` brokers,
``t/<name>`` topics (without partitions), ``p/<name>/<n>`` partitions,
``e/<kind>/<name>`` configuration entities.
A ``None`` value is a tombstone (deleted key).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from replication.controller import records as R
from replication.controller.image import (
    BrokerMeta,
    MetadataImage,
    PartitionMeta,
    TopicConfig,
    TopicMeta,
)


def _partition(p: PartitionMeta) -> dict[str, Any]:
    d = asdict(p)
    d["replicas"] = list(p.replicas)
    d["isr"] = list(p.isr)
    d["elr"] = list(p.elr)
    return d


def _topic(t: TopicMeta) -> dict[str, Any]:
    return {
        "name": t.name,
        "topic_id": t.topic_id,
        "replication_factor": t.replication_factor,
        "config": t.config.to_dict(),
        "partitions": len(t.partitions),
    }


def _meta(image: MetadataImage) -> dict[str, Any]:
    return {
        "cluster_id": image.cluster_id,
        "version": image.version,
        "last_broker_epoch": image.last_broker_epoch,
    }


def image_to_kv(image: MetadataImage) -> dict[str, Any]:
    """Every key of the image (a full snapshot)."""
    kv: dict[str, Any] = {"meta": _meta(image)}
    for b in image.brokers.values():
        kv[f"b/{b.broker_id}"] = asdict(b)
    for t in image.topics.values():
        kv[f"t/{t.name}"] = _topic(t)
        for p in t.partitions:
            kv[f"p/{t.name}/{p.partition}"] = _partition(p)
    for kind, named in image.entities.items():
        for name, value in named.items():
            kv[f"e/{kind}/{name}"] = value
    return kv


def image_from_kv(kv: Mapping[str, Any]) -> MetadataImage:
    """Rebuild the image from key-value state (tombstones already removed)."""
    meta = kv.get("meta") or {"cluster_id": "", "version": 0, "last_broker_epoch": 0}
    image = MetadataImage(
        cluster_id=meta["cluster_id"],
        version=meta["version"],
        last_broker_epoch=meta["last_broker_epoch"],
    )
    parts: dict[str, dict[int, PartitionMeta]] = {}
    for key, value in kv.items():
        if value is None:
            continue
        kind, _, rest = key.partition("/")
        if kind == "b":
            b = BrokerMeta(**value)
            image.brokers[b.broker_id] = b
        elif kind == "t":
            image.topics[value["name"]] = TopicMeta(
                name=value["name"],
                topic_id=value["topic_id"],
                replication_factor=value["replication_factor"],
                config=TopicConfig.from_dict(value["config"]),
            )
        elif kind == "p":
            d = dict(value)
            d["replicas"] = tuple(d["replicas"])
            d["isr"] = tuple(d["isr"])
            d["elr"] = tuple(d.get("elr", ()))
            p = PartitionMeta(**d)
            parts.setdefault(p.topic, {})[p.partition] = p
        elif kind == "e":
            ekind, _, ename = rest.partition("/")
            image.entities.setdefault(ekind, {})[ename] = dict(value)
    for name, t in image.topics.items():
        got = parts.get(name, {})
        t.partitions = [got[i] for i in sorted(got)]
    return image


def topic_sizes(image: MetadataImage, records: Iterable[R.Record]) -> dict[str, int]:
    """Partition counts of the topics ``records`` remove, taken *before* applying them."""
    return {
        r.name: len(image.topics[r.name].partitions)
        for r in records
        if isinstance(r, R.RemoveTopicRecord) and r.name in image.topics
    }


def kv_updates(
    after: MetadataImage, records: Iterable[R.Record], removed_sizes: Mapping[str, int]
) -> dict[str, Any | None]:
    """The keys ``records`` changed, with their values in ``after`` (the applied image).

    ``removed_sizes`` comes from :func:`topic_sizes` on the image before the
    records, so deleted partitions get tombstones. Values are absolute, so
    re-applying the same updates is harmless (idempotent), which the
    adapter's retry-after-timeout relies on.
    """
    out: dict[str, Any | None] = {"meta": _meta(after)}
    for r in records:
        match r:
            case R.RegisterBrokerRecord() | R.FenceBrokerRecord() | R.UnfenceBrokerRecord():
                b = after.brokers.get(r.broker_id)
                out[f"b/{r.broker_id}"] = asdict(b) if b else None
            case R.TopicRecord():
                t = after.topics.get(r.name)
                out[f"t/{r.name}"] = _topic(t) if t else None
            case R.PartitionRecord() | R.PartitionChangeRecord():
                p = after.partition(r.topic, r.partition)
                out[f"p/{r.topic}/{r.partition}"] = _partition(p) if p else None
                t = after.topics.get(r.topic)
                if t is not None:
                    out[f"t/{r.topic}"] = _topic(t)
            case R.RemoveTopicRecord():
                out[f"t/{r.name}"] = None
                for i in range(removed_sizes.get(r.name, 0)):
                    out[f"p/{r.name}/{i}"] = None
            case R.EntityRecord():
                out[f"e/{r.kind}/{r.name}"] = after.entity(r.kind, r.name)
            case R.ClusterRecord():
                pass  # carried by "meta"
            case _:
                raise ValueError(f"no key mapping for {r!r}")
    return out
