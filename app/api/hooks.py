"""Inbound webhooks: ``POST /v1/hooks/{topic}`` stores one delivery as one record.

Any node accepts a delivery. It checks the signature first (nothing is
forwarded or stored for a bad one), picks the partition from the key, and
hands the original request, headers included, to that partition's leader,
which checks again, dedupes and appends (see ``app/hooks/dedupe.py``).
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.api.deps import NodeDep
from app.api.forward import forward, leader_url
from app.api.params import openapi
from app.errors import ApiError
from app.hooks.config import HookConfig
from app.hooks.dedupe import HookLedgers
from app.hooks.ingest import build_delivery
from app.hooks.signatures import verify_github, verify_stripe
from app.node import Node, partition_for_key
from app.partition import PartitionGone, now_ms
from app.records import validate_records

router = APIRouter(prefix="/v1/hooks", tags=["hooks"])

HOOK_KIND = "hook"
LEDGER_MAX_ENTRIES = 1_000_000
"""Delivery ids remembered per partition (about 100 B each)."""


class _State:
    """Per-node hook state: parsed configs (cached by metadata value) and delivery ledgers."""

    def __init__(self) -> None:
        self.ledgers = HookLedgers(LEDGER_MAX_ENTRIES)
        self._configs: dict[str, tuple[dict[str, Any] | None, HookConfig]] = {}
        self._spread = itertools.count()

    def config(self, node: Node, topic: str) -> HookConfig:
        value = node.image.entity(HOOK_KIND, topic)
        cached = self._configs.get(topic)
        if cached is not None and cached[0] is value:
            return cached[1]
        cfg = HookConfig.from_entity(value)
        self._configs[topic] = (value, cfg)
        return cfg

    def keyless_partition(self, node: Node, topic: str, n: int) -> int:
        """Spread keyless deliveries, preferring partitions led here (no forwarding hop)."""
        turn = next(self._spread)
        local = [p for p in range(n) if node.leads(topic, p)]
        return local[turn % len(local)] if local else turn % n


def _state(request: Request) -> _State:
    st: _State | None = getattr(request.app.state, "hooks", None)
    if st is None:
        st = request.app.state.hooks = _State()
    return st


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _verify(cfg: HookConfig, request: Request, body: bytes) -> None:
    sig = cfg.signature
    if sig is None:
        return
    if sig.scheme == "github":
        verify_github(request.headers, body, sig.secrets)
    else:
        verify_stripe(request.headers, body, sig.secrets, sig.tolerance_s, int(time.time()))


@router.post(
    "/{topic}",
    responses={
        200: {"description": "stored (or a replay of a stored delivery: `duplicate: true`)"},
        202: {"description": "acks=none: accepted"},
        401: {"description": "SIGNATURE_MISSING / SIGNATURE_INVALID / SIGNATURE_EXPIRED; nothing stored"},
        404: {"description": "TOPIC_NOT_FOUND"},
    },
    openapi_extra=openapi([], [("topic", "string")], {"required": True, "content": {"*/*": {"schema": {}}}}),
)
async def receive_hook(request: Request) -> Response:
    """Any body, any content type: one delivery → one record in ``topic``.

    Parameters are read by hand, like the produce route: FastAPI's dependency
    solving was a large share of a small request.
    """
    node: Node = request.app.state.node
    topic: str = request.path_params["topic"]
    st = _state(request)
    t = node.topic(topic)
    cfg = st.config(node, topic)
    body = await request.body()
    _verify(cfg, request, body)
    d = build_delivery(cfg, request.headers, body)
    n = len(t.partitions)
    p = partition_for_key(d.key.encode(), n) if d.key is not None else st.keyless_partition(node, topic, n)
    if not node.leads(topic, p):
        return await forward(node, request, leader_url(node, topic, p, request), body, end_to_end=True)

    replica = node.replica(topic, p)
    leader = replica.leader
    now = now_ms()
    ledger = None
    if d.delivery_id is not None and cfg.dedupe_window_ms > 0:
        ledger = await st.ledgers.ledger(
            topic, p, replica.log, leader.leader_epoch, now, cfg.dedupe_window_ms
        )
        if not replica.is_leader or replica.leader.leader_epoch != ledger.leader_epoch:
            raise ApiError("NOT_LEADER", f"{topic}/{p} changed leader during the request; retry")
        # From here to the append: no await, so a concurrent copy sees this one's entry.
        seen = ledger.lookup(d.delivery_id, now, cfg.dedupe_window_ms)
        if seen is not None:
            return await _answer(replica, cfg, topic, p, seen, d.delivery_id, duplicate=True)
    if cfg.acks == "all" and not leader.can_commit():
        raise ApiError(
            "NOT_ENOUGH_REPLICAS",
            f"{topic}/{p} has {replica.isr_size()} in-sync replicas, "
            f"min_insync_replicas is {replica.config.min_insync_replicas}; nothing was written",
        )
    records = validate_records([d.record], now, n)
    _, offset = replica.append(records)
    if ledger is not None and d.delivery_id is not None:
        ledger.remember(d.delivery_id, offset, now)
    node.metrics.records_produced.inc()
    node.metrics.bytes_produced.inc(len(body))
    return await _answer(replica, cfg, topic, p, offset, d.delivery_id, duplicate=False)


async def _answer(
    replica: Any, cfg: HookConfig, topic: str, p: int, offset: int, delivery_id: str | None, duplicate: bool
) -> Response:
    """Wait per the hook's acks, then answer; a replay waits for the first copy to commit too."""
    if cfg.acks == "all":
        try:
            ok = await replica.wait_committed(offset, cfg.timeout_ms / 1000)
        except PartitionGone as e:
            raise ApiError("NOT_LEADER", f"{e}; the delivery may or may not be stored") from None
        if not ok:
            raise ApiError(
                "TIMEOUT",
                f"{topic}/{p} did not commit offset {offset} within {cfg.timeout_ms} ms; "
                "the delivery was written and may still commit (a retry is deduplicated)",
            )
    out = {"topic": topic, "partition": p, "offset": offset, "delivery_id": delivery_id,
           "duplicate": duplicate}
    return _json(out, 202 if cfg.acks == "none" else 200)


@router.put("/{topic}/config", openapi_extra={
    "requestBody": {"required": True, "content": {"application/json": {"schema": HookConfig.model_json_schema()}}}
})
async def put_hook_config(topic: str, request: Request, node: NodeDep) -> Response:
    """Set (replace) the topic's hook config; secrets are write-only."""
    node.topic(topic)
    try:
        cfg = HookConfig.model_validate_json(await request.body())
    except ValidationError as e:
        raise RequestValidationError(e.errors()) from None
    await node.controller_call(
        "put_entities", {"entities": [{"kind": HOOK_KIND, "name": topic, "value": cfg.to_entity(topic)}]}
    )
    return _json(cfg.public(topic))


@router.get("/{topic}/config")
async def get_hook_config(topic: str, request: Request, node: NodeDep) -> Response:
    """The effective config (the defaults when none was set), without secrets."""
    node.topic(topic)
    out = _state(request).config(node, topic).public(topic)
    out["configured"] = node.image.entity(HOOK_KIND, topic) is not None
    return _json(out)


@router.delete("/{topic}/config", status_code=204)
async def delete_hook_config(topic: str, node: NodeDep) -> Response:
    """Back to the defaults: unsigned deliveries are accepted again."""
    node.topic(topic)
    await node.controller_call(
        "put_entities", {"entities": [{"kind": HOOK_KIND, "name": topic, "value": None}]}
    )
    return Response(status_code=204)
