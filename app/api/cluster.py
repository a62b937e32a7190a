"""Cluster view, health, readiness and metrics."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.api.deps import NodeDep
from app.api.views import cluster_view
from app.errors import problem_response

router = APIRouter(tags=["cluster"])


@router.get("/v1/cluster")
async def cluster(node: NodeDep) -> Response:
    return Response(orjson.dumps(cluster_view(node)), media_type="application/json")


@router.get("/healthz")
async def healthz() -> Response:
    """The process is up and serving HTTP."""
    return Response(b'{"status":"ok"}', media_type="application/json")


@router.get("/readyz")
async def readyz(node: NodeDep) -> Response:
    """Registered with the controller and metadata loaded."""
    if not node.ready:
        return problem_response(503, "UNAVAILABLE", "node is starting or stopping")
    return Response(
        orjson.dumps({"status": "ready", "broker_epoch": node.broker_epoch}),
        media_type="application/json",
    )


@router.get("/metrics")
async def metrics(node: NodeDep) -> Response:
    return Response(generate_latest(node.metrics.registry), media_type=CONTENT_TYPE_LATEST)
