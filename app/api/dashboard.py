"""The admin dashboard: ``GET /`` (HTML), a partition page, its live feed and the internal reports.

Public, read-only and cross-origin readable (``access-control-allow-origin:
*``): ``/v1/dashboard/snapshot`` (JSON) and ``/v1/dashboard/events`` (SSE,
one snapshot per second), so a page whose node died can switch to another
broker's feed. Internal (cluster secret): ``/internal/v1/dashboard/state``
(this broker's led partitions) and ``/internal/v1/dashboard/partitions/{t}/{p}``
(this broker's history of one partition and its samples if it leads it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse, StreamingResponse
from fastapi.templating import Jinja2Templates

import app as app_package
from app.api.deps import NodeDep
from app.api.internal import require_secret
from app.dashboard.aggregate import Key
from app.dashboard.local import broker_state as local_broker_state
from app.dashboard.service import PUSH_INTERVAL_MS, Dashboard
from app.errors import ApiError
from app.node import Node


def asset_dir(name: str) -> Path:
    """``templates``/``static`` next to the ``app`` package (a checkout), else in the
    working directory (the container image copies them to its WORKDIR)."""
    beside = Path(app_package.__file__).resolve().parent.parent / name
    return beside if beside.is_dir() else Path.cwd() / name


templates = Jinja2Templates(directory=str(asset_dir("templates")))
CORS = {"access-control-allow-origin": "*"}


def get_dashboard(request: Request) -> Dashboard:
    dash: Dashboard = request.app.state.dashboard
    return dash


DashboardDep = Annotated[Dashboard, Depends(get_dashboard)]

router = APIRouter(tags=["dashboard"])
internal_router = APIRouter(
    prefix="/internal/v1/dashboard", tags=["internal"], dependencies=[Depends(require_secret)]
)


def _detail_key(node: Node, topic: str | None, partition: int | None) -> Key | None:
    if topic is None and partition is None:
        return None
    if topic is None or partition is None:
        raise ApiError("INVALID_REQUEST", "give both topic and partition, or neither")
    t = node.topic(topic)
    if not 0 <= partition < len(t.partitions):
        raise ApiError("PARTITION_NOT_FOUND", f"no partition {partition} in {topic!r}")
    return (topic, partition)


TopicQ = Annotated[str | None, Query(description="with partition: include that partition's detail")]
PartitionQ = Annotated[int | None, Query(ge=0)]


# ---- HTML -----------------------------------------------------------------------------------
def _page(request: Request, node: Node, snap: dict[str, Any], view: str, key: Key | None) -> HTMLResponse:
    return templates.TemplateResponse(request, f"{view}.html", {
        "snapshot": snap, "view": view, "node_id": node.settings.node_id,
        "topic": key[0] if key else None, "partition": key[1] if key else None,
        "push_interval_ms": PUSH_INTERVAL_MS,
    })


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
async def overview(request: Request, node: NodeDep, dash: DashboardDep) -> HTMLResponse:
    return _page(request, node, await dash.snapshot(), "overview", None)


@router.get("/topics/{topic}/partitions/{partition}", response_class=HTMLResponse, include_in_schema=False)
async def partition_page(
    topic: str, partition: int, request: Request, node: NodeDep, dash: DashboardDep
) -> HTMLResponse:
    key = _detail_key(node, topic, partition)
    return _page(request, node, await dash.snapshot(key), "partition", key)


# ---- live data --------------------------------------------------------------------------
@router.get("/v1/dashboard/snapshot")
async def snapshot(node: NodeDep, dash: DashboardDep, topic: TopicQ = None,
                   partition: PartitionQ = None) -> Response:
    """What the dashboard shows, as JSON (with ``topic``+``partition``: that partition
    only, plus its event history and sampled history)."""
    body = await dash.snapshot_json(_detail_key(node, topic, partition))
    return Response(body, media_type="application/json", headers=CORS)


@router.get("/v1/dashboard/events")
async def events(request: Request, node: NodeDep, dash: DashboardDep, topic: TopicQ = None,
                 partition: PartitionQ = None) -> StreamingResponse:
    """Server-Sent Events: the snapshot once per second (``data:`` = snapshot JSON)."""
    key = _detail_key(node, topic, partition)
    return StreamingResponse(
        _push(request, dash, key), media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no", **CORS},
    )


async def _push(request: Request, dash: Dashboard, key: Key | None) -> AsyncIterator[bytes]:
    yield b"retry: 2000\n\n"
    step = PUSH_INTERVAL_MS / 1000
    while not dash.stopping:
        yield b"data: %b\n\n" % await dash.snapshot_json(key)
        # Just after each wall-clock second: the brokers' samplers have just run.
        await asyncio.sleep(step - (time.time() % step) + 0.05)
        if await request.is_disconnected():
            return


# ---- internal ---------------------------------------------------------------------------
@internal_router.get("/state")
async def broker_state(dash: DashboardDep, topic: str | None = None) -> Response:
    """The live state of the partitions this broker leads (see ``app/dashboard/local.py``).

    Cached like the fan-out: however many nodes ask, it is built once per ``CACHE_TTL_MS``.
    With ``topic``: that topic only, built now (a describe must see its own writes).
    """
    if topic is not None:
        return Response(orjson.dumps(local_broker_state(dash.node, dash.sampler, topic)),
                        media_type="application/json")
    return Response(orjson.dumps(await dash.local_state()), media_type="application/json")


@internal_router.get("/partitions/{topic}/{partition}")
async def partition_detail(topic: str, partition: int, dash: DashboardDep) -> Response:
    return Response(orjson.dumps(await dash.local_detail(topic, partition)), media_type="application/json")
