"""Internal endpoints between nodes, authenticated with the cluster secret.

``POST /internal/v1/controller/{op}`` runs a controller command on the active
controller (register, heartbeat, create_topic, delete_topic,
alter_partition, confirm_leadership, leader_suspect); ``GET
/internal/v1/metadata?version=V&wait_ms=W`` long-polls metadata deltas;
``GET /internal/v1/controller`` says who the controller is.
``POST /internal/v1/replica/fetch`` is the replica fetch (``app/replica/serve.py``):
a JSON request for many partitions, a binary-framed answer (``app/replica/wire.py``). A node that is
not the active controller answers ``421 NOT_CONTROLLER`` with a
``leader_id`` hint. Bodies are JSON; see ``app/cluster/controller.py``.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from starlette.requests import ClientDisconnect

from app.api.deps import NodeDep
from app.cluster.controller import NotController
from app.errors import ApiError
from app.node import Node
from app.replica.serve import parse_replica_fetch, serve_replica_fetch
from app.replica.wire import CONTENT_TYPE


def require_secret(request: Request) -> None:
    node: Node = request.app.state.node
    want = f"Bearer {node.peers.secret}"
    got = request.headers.get("authorization", "")
    if not got:
        raise ApiError("UNAUTHORIZED", "internal endpoint: cluster secret required", status=401)
    if not hmac.compare_digest(got.encode(), want.encode()):
        raise ApiError("FORBIDDEN", "internal endpoint: wrong cluster secret", status=403)


router = APIRouter(
    prefix="/internal/v1", tags=["internal"], dependencies=[Depends(require_secret)],
    include_in_schema=True,
)


def _json(data: Any) -> Response:
    return Response(orjson.dumps(data), media_type="application/json")


def _not_controller(node: Node, e: NotController) -> ApiError:
    return ApiError(
        "NOT_CONTROLLER", str(e), status=421, leader_id=e.leader_id,
        leader_url=node.voters[e.leader_id].url if e.leader_id in node.voters else None,
    )


@router.get("/controller")
async def controller_info(node: NodeDep) -> Response:
    c = node.controller
    return _json({
        "node_id": node.settings.node_id,
        "active": bool(c and c.active),
        "leader_id": c.mlog.leader_id if c else None,
    })


@router.post("/controller/{op}")
async def controller_op(op: str, request: Request, node: NodeDep) -> Response:
    if node.controller is None:
        raise _not_controller(node, NotController(None))
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        raise ApiError("INVALID_REQUEST", "body must be JSON") from None
    if not isinstance(body, dict):
        raise ApiError("INVALID_REQUEST", "body must be a JSON object")
    try:
        return _json(await node.controller.handle(op, body))
    except NotController as e:
        raise _not_controller(node, e) from None
    except (KeyError, TypeError, ValueError) as e:
        raise ApiError("INVALID_REQUEST", f"bad {op} request: {e!r}") from None


@router.get("/metadata")
async def metadata(
    node: NodeDep,
    version: Annotated[int, Query(ge=0)] = 0,
    wait_ms: Annotated[int, Query(ge=0, le=60_000)] = 0,
) -> Response:
    if node.controller is None:
        raise _not_controller(node, NotController(None))
    try:
        return _json(await node.controller.metadata_since(version, wait_ms))
    except NotController as e:
        raise _not_controller(node, e) from None


@router.post("/replica/fetch")
async def replica_fetch(request: Request, node: NodeDep) -> Response:
    """A follower's long-poll fetch of every partition it follows on this broker."""
    try:
        body = await request.body()
    except ClientDisconnect:
        # The follower gave up mid-request (it was paused, or timed out): nobody to answer.
        return Response(status_code=499)
    try:
        fetch = parse_replica_fetch(orjson.loads(body))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise ApiError("INVALID_REQUEST", f"bad replica fetch: {e!r}") from None
    return Response(await serve_replica_fetch(node, fetch), media_type=CONTENT_TYPE)
