"""What this broker alone knows, as served to its peers (``/internal/v1/dashboard/...``).

The leader of a partition is the only replica that knows every follower's
progress (LEO, last fetch, LRS membership); followers know their own log.
This module never calls another node: the fan-out is ``aggregate.py``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from app.api.views import partition_state
from app.partition import now_ms

if TYPE_CHECKING:
    from app.dashboard.history import HistorySampler
    from app.node import Node

LEADER_FIELDS = ("leader_epoch", "partition_epoch", "isr", "lrs", "high_watermark", "log_end_offset",
                 "log_start_offset", "replica_states")


def broker_state(node: Node, sampler: HistorySampler, topic: str | None = None) -> dict[str, Any]:
    """Live state of the partitions this broker leads, and its own replicas of the others.

    ``leaders``: ``[topic, partition, {leader_epoch, partition_epoch, isr (the
    leader's), lrs, high_watermark, log_end_offset, log_start_offset,
    replica_states, records_per_s, broker}]``. ``replicas`` (not led here):
    ``[topic, partition, leader_epoch, log_end_offset, high_watermark,
    log_start_offset]``.
    """
    leaders: list[list[Any]] = []
    replicas: list[list[Any]] = []
    me = node.settings.node_id
    only = topic
    for (topic, p), r in list(node.partitions.items()):
        if only is not None and topic != only:
            continue
        ls = r.leader_state
        if ls is not None:
            full = partition_state(node, r.meta)
            view = {k: full[k] for k in LEADER_FIELDS}
            view["leader_epoch"] = ls.leader_epoch
            view["isr"] = list(ls.isr)
            view["broker"] = me
            view["records_per_s"] = sampler.rate((topic, p))
            leaders.append([topic, p, view])
        else:
            fs = r.follower_state
            replicas.append([topic, p, fs.leader_epoch if fs else r.meta.leader_epoch,
                             r.log_end_offset, r.high_watermark, r.log_start_offset])
    t = now_ms()
    out: dict[str, Any] = {
        "broker": me, "time_ms": t, "broker_epoch": node.broker_epoch,
        "metadata_version": node.image.version if node.agent is not None else -1,
        "leaders": leaders, "replicas": replicas, "sampler": sampler.stats(),
    }
    c = node.controller
    if c is not None and c.active and node.agent is not None:
        # Only the active controller sees heartbeats; other nodes' dashboards show these.
        out["heartbeats_ms_ago"] = {
            str(b): t - last for b in node.image.brokers if (last := c.last_heartbeat_ms(b)) >= 0
        }
    return out


async def partition_detail(
    node: Node, sampler: HistorySampler, topic: str, partition: int, limit: int = 100
) -> dict[str, Any]:
    """This broker's history of one partition (its catalog) and, if it leads it, the samples."""
    catalog = node.catalog
    events = await asyncio.to_thread(catalog.events, topic, partition, limit) if catalog else []
    return {"broker": node.settings.node_id, "events": events,
            "history": sampler.history((topic, partition))}
