"""JSON views of topics, partitions and the cluster (API.md shapes)."""

from __future__ import annotations

from typing import Any

from app.node import Node
from app.partition import now_ms
from replication.controller.image import NO_LEADER, PartitionMeta, TopicMeta


def partition_state(
    node: Node, meta: PartitionMeta, remote: dict[str, Any] | None = None
) -> dict[str, Any]:
    """PartitionState (API.md) from this node's replica, or from the leader's report.

    On the leader: every replica's LEO, lag, last fetch, in_sync and live
    (the LRS, seed 002) from the leader's replication state. Elsewhere,
    ``remote`` is the leader's own report of these (``app/dashboard``
    aggregation); without it, a follower shows its own replica only and a
    non-replica nothing (a report of this node's own, already built, is used as is).
    ``isr``/epochs are the controller's committed values (``isr`` as the reporting
    leader last adopted it).
    ``state_from`` names the broker whose replica the offsets come from.
    """
    replica = node.partitions.get((meta.topic, meta.partition))
    hw = leo = lso = None
    replica_states: list[dict[str, Any]] = []
    lrs: list[int] = []
    me = node.settings.node_id
    isr = list(meta.isr)
    state_from: int | None = me if replica is not None else None
    if remote is not None and (replica is None or replica.leader_state is None or remote["broker"] == me):
        hw, leo, lso = remote["high_watermark"], remote["log_end_offset"], remote["log_start_offset"]
        lrs, replica_states = list(remote["lrs"]), list(remote["replica_states"])
        # The leader's committed ISR, from the same instant as its LRS: a report may be a
        # few hundred ms old, and mixing it with fresher local metadata could show a
        # follower out of the ISR while still live.
        isr = list(remote["isr"])
        state_from = remote["broker"]
    elif replica is not None:
        hw, leo, lso = replica.high_watermark, replica.log_end_offset, replica.log_start_offset
        t = now_ms()
        ls = replica.leader_state
        if ls is not None:
            lrs = list(ls.live_replicas(t))
            maximal = ls.maximal_isr
            for b in meta.replicas:
                if b == me:
                    replica_states.append(
                        {"broker": b, "log_end_offset": leo, "lag": 0, "last_fetch_ms": 0,
                         "in_sync": b in ls.isr, "live": True}
                    )
                    continue
                prog = ls.replicas.get(b)
                last = prog.last_fetch_ms if prog else -1
                rleo = prog.log_end_offset if prog else 0
                replica_states.append(
                    {"broker": b, "log_end_offset": rleo, "lag": max(0, leo - rleo),
                     "last_fetch_ms": t - last if last >= 0 else None,
                     "in_sync": b in ls.isr, "live": b in lrs,
                     "pending_isr_change": b in maximal and b not in ls.isr}
                )
        else:
            fs = replica.follower_state
            replica_states.append(
                {"broker": me, "log_end_offset": leo,
                 "lag": max(0, fs.leader_high_watermark - leo) if fs else None,
                 "last_fetch_ms": t - fs.last_fetch_ok_ms if fs else None,
                 "in_sync": me in meta.isr, "live": True}
            )
    status = meta.status if meta.leader != NO_LEADER else "offline"
    return {
        "topic": meta.topic,
        "partition": meta.partition,
        "leader": meta.leader if meta.leader != NO_LEADER else None,
        "replicas": list(meta.replicas),
        "isr": isr,
        "lrs": lrs,
        "leader_epoch": meta.leader_epoch,
        "partition_epoch": meta.partition_epoch,
        "high_watermark": hw,
        "log_end_offset": leo,
        "log_start_offset": lso,
        "status": status,
        "under_replicated": len(isr) < len(meta.replicas),
        "last_election_unclean": meta.last_election_unclean,
        "elr": list(meta.elr),
        "replica_states": replica_states,
        "state_from": state_from,
    }


def topic_view(
    node: Node, t: TopicMeta, brief: bool = False,
    remote: dict[tuple[str, int], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``remote``: the leaders' reports by (topic, partition), see :func:`partition_state`."""
    remote = remote or {}
    d: dict[str, Any] = {
        "name": t.name,
        "topic_id": t.topic_id,
        "partitions": len(t.partitions) if brief else [
            partition_state(node, p, remote.get((p.topic, p.partition))) for p in t.partitions
        ],
        "replication_factor": t.replication_factor,
        "config": t.config.to_dict(),
    }
    return d


def cluster_view(node: Node) -> dict[str, Any]:
    img = node.image
    t = now_ms()
    c = node.controller
    raft_leader = c.mlog.leader_id if c is not None else None
    active = node.settings.node_id if c is not None and c.active else None
    if active is None and node.agent is not None:
        active = raft_leader if raft_leader is not None else node.agent._controller_hint

    def last_heartbeat(broker_id: int) -> int | None:
        if c is None or not c.active:
            return None
        last = c.last_heartbeat_ms(broker_id)
        return t - last if last >= 0 else None

    return {
        "cluster_id": img.cluster_id,
        "controller": {
            "node_id": active,
            "raft_leader": raft_leader,
            "mode": "standalone" if node.standalone else "raft",
            "this_node_active": bool(c and c.active),
        },
        "metadata_version": img.version,
        "brokers": [
            {
                "id": b.broker_id,
                "url": b.url,
                "zone": b.zone,
                "broker_epoch": b.broker_epoch,
                "status": "fenced" if b.fenced else "alive",
                "clean": b.clean,
                "voter": b.broker_id in node.voters or node.standalone,
                "last_heartbeat_ms": last_heartbeat(b.broker_id),
            }
            for b in sorted(img.brokers.values(), key=lambda b: b.broker_id)
        ],
        "node": {
            "id": node.settings.node_id, "url": node.settings.url, "time_ms": t,
            "broker_epoch": node.broker_epoch,
        },
    }
