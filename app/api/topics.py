"""Topics: create (idempotent), list, describe, delete; partition state."""

from __future__ import annotations

from typing import Any, Literal

import orjson
from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.api.dashboard import DashboardDep
from app.api.deps import NodeDep
from app.api.views import partition_state, topic_view
from app.errors import ApiError

router = APIRouter(prefix="/v1/topics", tags=["topics"])


class TopicConfigIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min_insync_replicas: int = Field(1, ge=1)
    retention_ms: int | None = Field(None, ge=1)
    retention_bytes: int | None = Field(None, ge=1)
    segment_bytes: int = Field(134_217_728, ge=1024, le=1 << 31)
    segment_ms: int = Field(604_800_000, ge=1000)
    cleanup_policy: Literal["delete"] = Field(
        "delete", description="Only 'delete' is implemented; 'compact' is refused (400)."
    )
    unclean_leader_election: bool = False


class TopicCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., description="^[A-Za-z0-9._-]{1,249}$, not '.'/'..', no '__' prefix")
    partitions: int = Field(1, ge=1, le=10_000)
    replication_factor: int = Field(1, ge=1, le=16)
    config: TopicConfigIn = Field(default_factory=lambda: TopicConfigIn())


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


@router.post(
    "",
    status_code=201,
    responses={200: {"description": "already existed, same spec"}},
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": TopicCreate.model_json_schema()}},
        }
    },
)
async def create_topic(request: Request, node: NodeDep) -> Response:
    """Body is parsed as JSON whatever the content type, so a bare ``curl -d`` works."""
    try:
        body = TopicCreate.model_validate_json(await request.body())
    except ValidationError as e:
        raise RequestValidationError(e.errors()) from None
    out = await node.controller_call("create_topic", body.model_dump())
    return _json(topic_view(node, node.topic(body.name)), 200 if out.get("existed") else 201)


@router.get("")
async def list_topics(node: NodeDep) -> Response:
    return _json({"topics": [topic_view(node, t, brief=True) for t in node.image.topics.values()]})


@router.get("/{topic}")
async def describe_topic(topic: str, node: NodeDep, dash: DashboardDep) -> Response:
    """Offsets and replica progress come from each partition's leader, whichever node answers."""
    t = node.topic(topic)
    return _json(topic_view(node, t, remote=await dash.states.leader_reports(t.partitions, fresh_topic=topic)))


@router.delete("/{topic}", status_code=204)
async def delete_topic(topic: str, node: NodeDep) -> Response:
    await node.controller_call("delete_topic", {"name": topic})
    return Response(status_code=204)


@router.get("/{topic}/partitions/{partition}")
async def describe_partition(topic: str, partition: int, node: NodeDep, dash: DashboardDep) -> Response:
    t = node.topic(topic)
    if not 0 <= partition < len(t.partitions):
        raise ApiError("PARTITION_NOT_FOUND", f"no partition {partition} in {topic!r}")
    meta = t.partitions[partition]
    remote = await dash.states.leader_reports([meta], fresh_topic=topic)
    return _json(partition_state(node, meta, remote.get((topic, partition))))


@router.get("/{topic}/partitions/{partition}/events")
async def partition_events(topic: str, partition: int, node: NodeDep, limit: int = 100) -> Response:
    """History of the partition's state changes on this node, newest first."""
    t = node.topic(topic)
    if not 0 <= partition < len(t.partitions):
        raise ApiError("PARTITION_NOT_FOUND", f"no partition {partition} in {topic!r}")
    assert node.catalog is not None
    return _json({"events": node.catalog.events(topic, partition, max(1, min(limit, 1000)))})
