"""The dashboard snapshot: cluster header, topics, partitions, and one partition's detail.

Pushed as JSON over SSE (``/v1/dashboard/events``) and served at
``/v1/dashboard/snapshot``. Offsets come from each partition's leader (the
aggregation), epochs/ISR/status from this node's committed metadata, like
``GET /v1/topics/{t}``.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from app.api.views import cluster_view, partition_state
from app.dashboard.aggregate import BrokerStates, Key, leader_index
from app.dashboard.local import partition_detail as local_detail
from app.partition import now_ms
from app.subscriptions.model import SUBSCRIPTION

if TYPE_CHECKING:
    from app.dashboard.history import HistorySampler
    from app.node import Node

SNAPSHOT_VERSION = 1


async def build_snapshot(
    node: Node, states: BrokerStates, sampler: HistorySampler, detail: Key | None = None
) -> dict[str, Any]:
    """Everything ``GET /`` shows; with ``detail``, only that partition plus its history."""
    reports = await states.states(states.unfenced_brokers())
    leaders = leader_index(reports.values())
    cluster = cluster_view(node)
    ctl = reports.get(cluster["controller"]["node_id"]) or {}
    beats = ctl.get("heartbeats_ms_ago") or {}
    for b in cluster["brokers"]:
        if b["last_heartbeat_ms"] is None:
            b["last_heartbeat_ms"] = beats.get(str(b["id"]))
        rep = reports.get(b["id"])
        b["reachable"] = rep is not None if b["status"] == "alive" else None
        b["leads"] = len(rep["leaders"]) if rep else None
        b["sampler"] = rep["sampler"] if rep else None
    topics: list[dict[str, Any]] = []
    counts = {"topics": 0, "partitions": 0, "under_replicated": 0, "offline": 0}
    image = node.image
    for name in sorted(image.topics):
        if detail is not None and name != detail[0]:
            continue
        t = image.topics[name]
        parts = []
        for meta in t.partitions:
            if detail is not None and meta.partition != detail[1]:
                continue
            rep = leaders.get((name, meta.partition))
            if rep is not None and rep["broker"] != meta.leader:
                rep = None  # a deposed leader's last word; metadata moved on
            st = partition_state(node, meta, rep)
            st["records_per_s"] = rep.get("records_per_s") if rep else sampler.rate((name, meta.partition))
            parts.append(st)
            counts["partitions"] += 1
            counts["under_replicated"] += st["under_replicated"]
            counts["offline"] += st["status"] == "offline"
        counts["topics"] += 1
        topics.append({"name": name, "topic_id": t.topic_id, "replication_factor": t.replication_factor,
                       "partition_count": len(t.partitions), "config": t.config.to_dict(),
                       "partitions": parts})
    snap: dict[str, Any] = {
        "version": SNAPSHOT_VERSION, "time_ms": now_ms(), "cluster": cluster, "summary": counts,
        "topics": topics,
    }
    if detail is not None:
        snap["detail"] = await partition_detail(node, states, sampler, detail, topics)
    else:
        snap["subscriptions"] = subscription_rows(node)
    return snap


def subscription_rows(node: Node) -> list[dict[str, Any]]:
    """Push subscriptions with their delivery status (issue #8: lag, last success, last
    error, attempts, dead-lettered), as ``GET /v1/subscriptions`` reports them.

    Only the target's scheme and host are shown: a URL's path or query may carry a
    token, and the dashboard is read by more people than the subscription API.
    """
    rows = []
    now = now_ms()
    for sid, cfg in sorted(node.image.entities_of(SUBSCRIPTION).items()):
        st = node.subscriptions.status(sid, cfg)
        target = urlsplit(str(cfg.get("url", "")))
        rows.append({
            "id": sid, "topic": cfg.get("topic"), "target": f"{target.scheme}://{target.netloc.rpartition('@')[2]}",
            "paused": bool(cfg.get("paused")), "dead_letter_topic": cfg.get("dead_letter_topic"),
            **{k: st[k] for k in ("state", "lag", "delivered", "dead_lettered", "attempts", "last_success_ms",
                                  "last_error", "last_error_ms")},
            # Ages, like the broker heartbeats: the page shows "… ms ago" without trusting its own clock.
            "last_success_ago_ms": None if st["last_success_ms"] is None else max(0, now - st["last_success_ms"]),
            "last_error_ago_ms": None if st["last_error_ms"] is None else max(0, now - st["last_error_ms"]),
        })
    return rows


async def partition_detail(
    node: Node, states: BrokerStates, sampler: HistorySampler, key: Key, topics: list[dict[str, Any]]
) -> dict[str, Any]:
    """Events from every reachable broker's catalog, merged; samples from the leader."""
    topic, partition = key
    found = bool(topics and topics[0]["partitions"])
    if not found:
        return {"topic": topic, "partition": partition, "found": False, "events": [], "history": None}
    leader = topics[0]["partitions"][0]["leader"]
    brokers = states.unfenced_brokers()
    answers = await asyncio.gather(*(
        states.detail(b, topic, partition, lambda: local_detail(node, sampler, topic, partition))
        for b in brokers
    ))
    history = None
    raw: list[tuple[int, dict[str, Any]]] = []
    for b, a in zip(brokers, answers, strict=True):
        if a is None:
            continue
        raw += [(b, e) for e in a["events"]]
        if b == leader and a.get("history") is not None:
            history = a["history"]
    return {"topic": topic, "partition": partition, "found": True, "events": merge_events(raw),
            "history": history, "history_from": leader if history is not None else None}


def merge_events(raw: list[tuple[int, dict[str, Any]]], limit: int = 200) -> list[dict[str, Any]]:
    """One row per cluster event, newest first, with the brokers that recorded it.

    Every replica records a leader change or ISR change it learns from
    metadata; only the leader that proposed an ISR change knows why (its row
    has ``proposed_by``), so that row's reason wins. Rows of one event share
    kind, leader epoch and the partition epoch in their detail.
    """
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for broker, e in raw:
        d = e.get("detail") or {}
        if e["kind"] in ("leader_change", "isr_shrink", "isr_expand", "unclean_election"):
            gk: tuple[Any, ...] = (e["kind"], e.get("leader_epoch"), d.get("partition_epoch"),
                                   d.get("status"), tuple(d.get("new_isr") or d.get("isr") or ()))
        else:  # truncations, recovery: one broker's own log
            gk = (e["kind"], broker, e["ts_ms"], e.get("reason"))
        g = groups.get(gk)
        if g is None:
            groups[gk] = {**e, "brokers": [broker]}
            continue
        if broker not in g["brokers"]:
            g["brokers"].append(broker)
        g["ts_ms"] = min(g["ts_ms"], e["ts_ms"])
        if "proposed_by" in d and "proposed_by" not in (g.get("detail") or {}):
            g["reason"], g["detail"] = e["reason"], d
    out = sorted(groups.values(), key=lambda g: g["ts_ms"], reverse=True)
    for g in out:
        g["brokers"].sort()
    return out[:limit]
