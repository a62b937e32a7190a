"""Push subscriptions: create, list, describe (with delivery status), pause, resume, delete.

Configuration is a ``subscription`` entity in cluster metadata (any node
serves these routes; writes go to the controller). Delivery itself runs on
the partition leaders (``app/subscriptions/manager.py``).
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.api.deps import NodeDep
from app.api.topics import TopicConfigIn, TopicCreate
from app.errors import ApiError
from app.node import Node
from app.partition import now_ms
from app.subscriptions.model import (
    STATE,
    SUBSCRIPTION,
    SubscriptionPatch,
    SubscriptionSpec,
    new_id,
    patched_spec,
    public_view,
    same_spec,
    spec_value,
    stored_value,
)
from app.subscriptions.ssrf import TargetRefused, check_target
from replication.controller.errors import ControllerError

router = APIRouter(prefix="/v1/subscriptions", tags=["subscriptions"])

TOPIC_NAME_MAX = 249


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _view(node: Node, sid: str, cfg: dict[str, Any]) -> dict[str, Any]:
    return {**public_view(cfg), "status": node.subscriptions.status(sid, cfg)}


def _get(node: Node, sid: str) -> dict[str, Any]:
    cfg = node.image.entity(SUBSCRIPTION, sid)
    if cfg is None:
        raise ApiError("SUBSCRIPTION_NOT_FOUND", f"subscription {sid!r} does not exist", status=404)
    return cfg


def _states_of(node: Node, sid: str) -> list[dict[str, Any]]:
    """Deletions of every cursor entity of ``sid`` (a re-created id starts fresh)."""
    return [
        {"kind": STATE, "name": name, "value": None}
        for name, v in node.image.entities_of(STATE).items()
        if v.get("subscription") == sid
    ]


async def _ensure_dead_letter_topic(node: Node, name: str, source: str) -> None:
    if name in node.image.topics:
        return
    src = node.topic(source)
    rf = src.replication_factor
    body = TopicCreate(
        name=name, partitions=1, replication_factor=rf,
        config=TopicConfigIn(min_insync_replicas=min(src.config.min_insync_replicas, rf)),
    )
    try:
        await node.controller_call("create_topic", body.model_dump())
    except ControllerError as e:
        if e.code != "TOPIC_EXISTS":  # created concurrently: use it
            raise ApiError(e.code, f"dead-letter topic {name!r}: {e.detail}") from None


_CREATE_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": SubscriptionSpec.model_json_schema()}},
    }
}


@router.post(
    "", status_code=201, summary="Create a push subscription",
    responses={200: {"description": "already existed with the same spec"},
               400: {"description": "invalid, or target refused (TARGET_NOT_ALLOWED)"},
               404: {"description": "topic or partition not found"},
               409: {"description": "SUBSCRIPTION_EXISTS with another spec"}},
    openapi_extra=_CREATE_BODY,
)
async def create_subscription(request: Request, node: NodeDep) -> Response:
    try:
        spec = SubscriptionSpec.model_validate_json(await request.body())
    except ValidationError as e:
        raise RequestValidationError(e.errors()) from None
    topic = node.topic(spec.topic)
    n = len(topic.partitions)
    for p in spec.partitions or []:
        if p >= n:
            raise ApiError("PARTITION_NOT_FOUND", f"topic {spec.topic!r} has partitions 0..{n - 1}, not {p}")
    if spec.retry_backoff_max_ms < spec.retry_backoff_ms:
        raise ApiError("INVALID_REQUEST", "retry_backoff_max_ms must be >= retry_backoff_ms")
    try:
        await check_target(spec.url, node.subscriptions.policy)
    except TargetRefused as e:
        raise ApiError("TARGET_NOT_ALLOWED" if e.policy else "INVALID_TARGET", str(e), status=400) from None
    sid = spec.id or new_id()
    dlq = spec.dead_letter_topic or f"{spec.topic}.dlq.{sid}"
    if len(dlq) > TOPIC_NAME_MAX:
        raise ApiError("INVALID_REQUEST", f"dead-letter topic name {dlq[:40]!r}... is too long; set dead_letter_topic")
    if dlq == spec.topic:
        raise ApiError("INVALID_REQUEST", "dead_letter_topic must differ from the subscribed topic")
    wanted = spec_value(spec, sid, dlq)
    existing = node.image.entity(SUBSCRIPTION, sid)
    if existing is not None:
        if same_spec(existing, wanted):
            return _json(_view(node, sid, existing), 200)
        raise ApiError("SUBSCRIPTION_EXISTS", f"subscription {sid!r} exists with another spec", status=409)
    await _ensure_dead_letter_topic(node, dlq, spec.topic)
    value = stored_value(wanted, now_ms())
    try:
        await node.controller_call("put_entities", {"entities": [
            {"kind": SUBSCRIPTION, "name": sid, "value": value, "expect": "absent"}, *_states_of(node, sid),
        ]})
    except ControllerError as e:
        current = node.image.entity(SUBSCRIPTION, sid)
        if e.code == "ENTITY_EXISTS" and current is not None and same_spec(current, wanted):
            return _json(_view(node, sid, current), 200)
        if e.code == "ENTITY_EXISTS":
            raise ApiError("SUBSCRIPTION_EXISTS", f"subscription {sid!r} exists with another spec",
                           status=409) from None
        raise
    return _json(_view(node, sid, value), 201)


@router.get("", summary="List push subscriptions with their delivery status")
async def list_subscriptions(node: NodeDep, topic: str | None = None) -> Response:
    subs = node.image.entities_of(SUBSCRIPTION)
    return _json({"subscriptions": [
        _view(node, sid, cfg) for sid, cfg in sorted(subs.items()) if topic is None or cfg.get("topic") == topic
    ]})


@router.get("/{sid}", summary="A push subscription and its delivery status")
async def describe_subscription(sid: str, node: NodeDep) -> Response:
    return _json(_view(node, sid, _get(node, sid)))


async def _replace(node: Node, sid: str, new: dict[str, Any]) -> None:
    """Store a changed subscription (it must still exist), then apply it here before answering."""
    try:
        await node.controller_call("put_entities", {"entities": [
            {"kind": SUBSCRIPTION, "name": sid, "value": new, "expect": "present"},
        ]})
    except ControllerError as e:
        if e.code == "ENTITY_NOT_FOUND":
            raise ApiError("SUBSCRIPTION_NOT_FOUND", f"subscription {sid!r} does not exist", status=404) from None
        raise
    await node.subscriptions.reconcile()  # in effect on this node when the answer comes


async def _set_paused(node: Node, sid: str, paused: bool) -> Response:
    cfg = _get(node, sid)
    if bool(cfg.get("paused")) != paused:
        new = {**cfg, "paused": paused}
        await _replace(node, sid, new)
    return _json(_view(node, sid, _get(node, sid)))


@router.patch(
    "/{sid}", summary="Change a subscription's target or delivery settings (the cursor is kept)",
    openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": SubscriptionPatch.model_json_schema()}}}},
)
async def update_subscription(sid: str, request: Request, node: NodeDep) -> Response:
    """Workers delivering it restart with the new settings from the committed cursor
    (at-least-once: the batch in flight may be sent again, to the new target). On the
    node that answers, the change is in effect when the answer comes; other brokers
    apply it with their next metadata update."""
    stored = _get(node, sid)
    try:
        doc = orjson.loads(await request.body())
        if not isinstance(doc, dict):
            raise ValueError("body must be a JSON object")
        SubscriptionPatch.model_validate(doc)
        spec = patched_spec(stored, doc)
    except orjson.JSONDecodeError as e:
        raise ApiError("INVALID_REQUEST", f"malformed JSON: {e}") from None
    except ValidationError as e:
        raise RequestValidationError(e.errors()) from None
    except ValueError as e:
        raise ApiError("INVALID_REQUEST", str(e)) from None
    if spec.retry_backoff_max_ms < spec.retry_backoff_ms:
        raise ApiError("INVALID_REQUEST", "retry_backoff_max_ms must be >= retry_backoff_ms")
    if spec.url != stored.get("url"):
        try:
            await check_target(spec.url, node.subscriptions.policy)
        except TargetRefused as e:
            raise ApiError("TARGET_NOT_ALLOWED" if e.policy else "INVALID_TARGET", str(e), status=400) from None
    kept: dict[str, Any] = {k: stored[k] for k in ("uid", "created_ms") if k in stored}
    new = {**spec_value(spec, sid, str(stored["dead_letter_topic"])), **kept}
    if new != stored:
        await _replace(node, sid, new)
    return _json(_view(node, sid, _get(node, sid)))


@router.post("/{sid}/pause", summary="Stop delivering (the cursor is kept)")
async def pause_subscription(sid: str, node: NodeDep) -> Response:
    return await _set_paused(node, sid, True)


@router.post("/{sid}/resume", summary="Resume delivering from the cursor")
async def resume_subscription(sid: str, node: NodeDep) -> Response:
    return await _set_paused(node, sid, False)


@router.delete("/{sid}", status_code=204, summary="Delete a subscription and its cursors")
async def delete_subscription(sid: str, node: NodeDep) -> Response:
    _get(node, sid)
    try:
        await node.controller_call("put_entities", {"entities": [
            {"kind": SUBSCRIPTION, "name": sid, "value": None, "expect": "present"}, *_states_of(node, sid),
        ]})
    except ControllerError as e:
        if e.code == "ENTITY_NOT_FOUND":
            raise ApiError("SUBSCRIPTION_NOT_FOUND", f"subscription {sid!r} does not exist", status=404) from None
        raise
    return Response(status_code=204)
