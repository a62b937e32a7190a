"""Server-Sent Events: one event per record, ``id:`` = offset, resumable.

A reconnecting EventSource sends ``Last-Event-ID``; the stream resumes at
the offset after it, so a consumer sees every record once per connection
and no gap across reconnects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from app.api.deps import NodeDep
from app.api.forward import forward_stream, leader_url
from app.api.records import Isolation, resolve_offset
from app.errors import ApiError
from app.partition import PartitionGone, PartitionReplica

router = APIRouter(prefix="/v1/topics", tags=["records"])

KEEPALIVE_MS = 15_000


@router.get("/{topic}/partitions/{partition}/stream", summary="Tail records as SSE")
async def stream(
    topic: str,
    partition: int,
    request: Request,
    node: NodeDep,
    offset: str | None = Query(None, description="integer, 'earliest' or 'latest' (default)"),
    timestamp: int | None = Query(None, ge=0),
    isolation: Isolation = "committed",
    last_event_id: str | None = Header(None),
) -> StreamingResponse:
    if not node.leads(topic, partition):
        return await forward_stream(node, request, leader_url(node, topic, partition, request))
    replica = node.replica(topic, partition)
    committed = isolation == "committed"
    if last_event_id is not None:
        try:
            start = int(last_event_id) + 1
        except ValueError:
            raise ApiError("INVALID_REQUEST", "Last-Event-ID must be an offset") from None
        if start < 0:
            raise ApiError("INVALID_REQUEST", "Last-Event-ID must be >= 0")
    else:
        start = resolve_offset(offset if offset is not None else "latest", timestamp, committed, replica)
    replica.check_offset(start)
    return StreamingResponse(
        _events(node, replica, start, committed, request),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


async def _events(
    node: NodeDep, replica: PartitionReplica, offset: int, committed: bool, request: Request
) -> AsyncIterator[bytes]:
    yield b"retry: 1000\n\n"
    while True:
        try:
            events = await replica.read_events(offset, 1000, KEEPALIVE_MS, committed)
        except (PartitionGone, ApiError) as e:
            yield b"event: error\ndata: %b\n\n" % str(e).encode()
            return
        if not events:
            if await request.is_disconnected():
                return
            yield b": keepalive\n\n"
            continue
        node.metrics.records_fetched.inc(len(events))
        offset = events[-1][0] + 1
        yield b"".join(
            b"id: %d\ndata: %b\n\n" % (off, rec)  # type: ignore[str-format]
            for off, rec in events
        )
