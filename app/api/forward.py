"""Forwarding a public request to the partition leader (API.md: any node, one hop).

A forwarded request carries ``x-tidelog-forwarded``; a node that receives one
for a partition it does not lead answers ``421 NOT_LEADER`` instead of
forwarding again, so stale metadata can never make requests loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
from fastapi import Request, Response
from fastapi.responses import StreamingResponse

from app.errors import ApiError
from app.node import Node
from replication.controller.image import NO_LEADER

FORWARDED = "x-tidelog-forwarded"


def leader_url(node: Node, topic: str, partition: int, request: Request) -> str:
    """URL of the partition's leader; NOT_LEADER when there is none or no second hop."""
    meta = node.image.partition(topic, partition)
    if meta is None:
        raise ApiError("PARTITION_NOT_FOUND", f"no partition {topic}/{partition}")
    if meta.leader == NO_LEADER or meta.leader not in node.image.brokers:
        raise ApiError(
            "NOT_LEADER", f"{topic}/{partition} has no leader right now (status {meta.status})",
            status=503,
        )
    if request.headers.get(FORWARDED):
        raise ApiError(
            "NOT_LEADER",
            f"this node does not lead {topic}/{partition}; leader is broker {meta.leader}",
            leader=meta.leader,
        )
    return node.image.brokers[meta.leader].url


_HOP_BY_HOP = frozenset((
    "host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer",
    "upgrade", "proxy-authorization", "proxy-connection", FORWARDED,
))


def _headers(request: Request, end_to_end: bool = False) -> dict[str, str]:
    """Headers for the hop to the leader: the few the API reads, or (``end_to_end``)
    every end-to-end header, which a webhook needs for its signature and delivery id."""
    h = {FORWARDED: "1"}
    if end_to_end:
        for name, value in request.headers.items():
            if name not in _HOP_BY_HOP:
                h[name] = value
        return h
    for name in ("content-type", "last-event-id", "accept"):
        v = request.headers.get(name)
        if v is not None:
            h[name] = v
    return h


def _unavailable(url: str, e: Exception) -> ApiError:
    return ApiError("UNAVAILABLE", f"leader at {url} unreachable: {e!r}", status=503)


async def forward(
    node: Node, request: Request, url: str, body: bytes | None = None, end_to_end: bool = False
) -> Response:
    """Send this request to ``url`` (same path and query) and relay the answer."""
    target = url + request.url.path + (f"?{request.url.query}" if request.url.query else "")
    try:
        resp = await node.peers.http.request(
            request.method, target, content=body, headers=_headers(request, end_to_end),
            timeout=node.settings.forward_timeout_ms / 1000,
        )
    except httpx.HTTPError as e:
        raise _unavailable(url, e) from None
    return Response(
        resp.content, status_code=resp.status_code,
        media_type=resp.headers.get("content-type", "application/json"),
    )


async def forward_json(
    node: Node, url: str, path: str, params: dict[str, Any], payload: bytes
) -> httpx.Response:
    try:
        return await node.peers.http.post(
            url + path, params=params, content=payload,
            headers={FORWARDED: "1", "content-type": "application/json"},
            timeout=node.settings.forward_timeout_ms / 1000,
        )
    except httpx.HTTPError as e:
        raise _unavailable(url, e) from None


async def forward_stream(node: Node, request: Request, url: str) -> StreamingResponse:
    """Relay a Server-Sent Events stream from the leader."""
    target = url + request.url.path + (f"?{request.url.query}" if request.url.query else "")
    client = node.peers.http
    req = client.build_request("GET", target, headers=_headers(request), timeout=None)
    try:
        resp = await client.send(req, stream=True)
    except httpx.HTTPError as e:
        raise _unavailable(url, e) from None
    if resp.status_code != 200:
        content = await resp.aread()
        await resp.aclose()
        return Response(  # type: ignore[return-value]
            content, status_code=resp.status_code,
            media_type=resp.headers.get("content-type", "application/json"),
        )

    async def relay() -> AsyncIterator[bytes]:
        try:
            async for chunk in resp.aiter_raw():
                yield chunk
        finally:
            await resp.aclose()

    return StreamingResponse(
        relay(), media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )
