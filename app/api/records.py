"""Produce and fetch: the hot path. Bodies are parsed with orjson, responses
are spliced bytes; pydantic is used for query parameters only."""

from __future__ import annotations

import asyncio
import time
from typing import Literal

import orjson
from fastapi import APIRouter, Request, Response

from app.api.deps import NodeDep
from app.api.forward import forward, forward_json, leader_url
from app.api.params import ChoiceParam, IntParam, Param, StrParam, openapi, parse, path_int
from app.errors import ApiError
from app.node import Node
from app.partition import PartitionGone, now_ms
from app.records import parse_json_body, parse_ndjson_body, validate_records

router = APIRouter(prefix="/v1/topics", tags=["records"])

Acks = Literal["all", "leader", "none"]
Isolation = Literal["committed", "uncommitted"]
JSON = "application/json"


def _content_kind(request: Request) -> str:
    ctype = request.headers.get("content-type", JSON).split(";", 1)[0].strip().lower()
    # curl -d sends form-urlencoded by default; treat it as JSON so a bare curl works.
    if ctype in (JSON, "", "text/json", "application/x-www-form-urlencoded"):
        return "json"
    if ctype in ("application/x-ndjson", "application/ndjson", "application/jsonl"):
        return "ndjson"
    raise ApiError(
        "UNSUPPORTED_MEDIA_TYPE",
        f"content-type {ctype!r} not supported: use application/json or application/x-ndjson",
    )


async def _produce(
    node: NodeDep, request: Request, topic: str, partition: int | None, acks: str, timeout_ms: int
) -> Response:
    started = time.perf_counter()
    t = node.topic(topic)
    if partition is not None and not 0 <= partition < len(t.partitions):
        raise ApiError(
            "PARTITION_NOT_FOUND",
            f"topic {topic!r} has partitions 0..{len(t.partitions) - 1}, not {partition}",
        )
    kind = _content_kind(request)
    body = await request.body()
    raw = parse_json_body(body) if kind == "json" else parse_ndjson_body(body)
    records = validate_records(raw, now_ms(), len(t.partitions))
    if partition is not None:
        for i, r in enumerate(records):
            if r.partition is not None and r.partition != partition:
                raise ApiError(
                    "INVALID_REQUEST",
                    f"records[{i}].partition {r.partition} conflicts with the URL's {partition}",
                )
    groups = node.route(t, records, partition)
    remote = {p: idxs for p, idxs in groups.items() if not node.leads(topic, p)}
    if remote:
        urls = {p: leader_url(node, topic, p, request) for p in remote}
        if len(remote) == len(groups) and partition is not None:
            return await forward(node, request, urls[partition], body)
        groups = {p: idxs for p, idxs in groups.items() if p not in remote}
    replicas = {p: node.replica(topic, p) for p in groups}
    if acks == "all":
        for p, rep in replicas.items():
            if not rep.leader.can_commit():
                raise ApiError(
                    "NOT_ENOUGH_REPLICAS",
                    f"{topic}/{p} has {rep.isr_size()} in-sync replicas, "
                    f"min_insync_replicas is {rep.config.min_insync_replicas}; nothing was written",
                )
    offsets: list[tuple[int, int]] = [(0, 0)] * len(records)
    lasts: list[tuple[int, int]] = []
    for p, idxs in groups.items():
        base, last = replicas[p].append([records[i] for i in idxs])
        for k, i in enumerate(idxs):
            offsets[i] = (p, base + k)
        lasts.append((p, last))
    if remote:
        # Partitions led elsewhere: one forwarded request per partition, concurrently.
        answers = await asyncio.gather(*(
            forward_json(
                node, urls[p], f"/v1/topics/{topic}/partitions/{p}/records",
                {"acks": acks, "timeout_ms": timeout_ms},
                orjson.dumps({"records": [raw[i] for i in idxs]}),
            )
            for p, idxs in remote.items()
        ))
        for (p, idxs), resp in zip(remote.items(), answers, strict=True):
            if resp.status_code >= 400:
                return Response(resp.content, status_code=resp.status_code,
                                media_type=resp.headers.get("content-type", JSON))
            got = orjson.loads(resp.content)["offsets"]
            for i, o in zip(idxs, got, strict=True):
                offsets[i] = (p, o["offset"] if o["offset"] is not None else -1)
    node.metrics.records_produced.inc(len(records))
    node.metrics.bytes_produced.inc(len(body))
    if acks != "none" and node.settings.fsync_policy == "always":
        await asyncio.to_thread(lambda: [replicas[p].log.flush() for p in groups])
    if acks == "all":
        deadline = time.monotonic() + timeout_ms / 1000
        try:
            for p, last in lasts:
                if not await replicas[p].wait_committed(last, deadline - time.monotonic()):
                    node.metrics.produce_requests.labels("timeout").inc()
                    raise ApiError(
                        "TIMEOUT",
                        f"{topic}/{p} did not commit offset {last} within {timeout_ms} ms; "
                        "the records were written and may still commit",
                    )
        except PartitionGone as e:
            raise ApiError("NOT_LEADER", f"{e}; the records may or may not be committed") from None
    node.metrics.produce_requests.labels("ok").inc()
    node.metrics.produce_latency.observe(time.perf_counter() - started)
    return Response(b'{"offsets":[%b]}' % _offsets_json(offsets, acks == "none"), media_type=JSON)


def _offsets_json(offsets: list[tuple[int, int]], unknown: bool) -> bytes:
    """The ``offsets`` array; a run on one partition (the usual batch) is joined in C."""
    if unknown:
        return b",".join(b'{"partition":%d,"offset":null}' % (p,) for p, _ in offsets)
    p0, first = offsets[0]
    n = len(offsets)
    if offsets[-1] == (p0, first + n - 1) and all(p == p0 for p, _ in offsets):
        sep = b'},{"partition":%d,"offset":' % p0
        digits = sep.join(str(o).encode() for o in range(first, first + n))
        return b'{"partition":%d,"offset":%b}' % (p0, digits)
    return b",".join(b'{"partition":%d,"offset":%d}' % po for po in offsets)


PRODUCE_PARAMS: tuple[Param, ...] = (
    ChoiceParam("acks", "all", ("all", "leader", "none"),
                "all: wait until committed (HW passes the records); leader: appended; none: do not wait"),
    IntParam("timeout_ms", 5000, 0, 300_000, "how long acks=all waits before 504 TIMEOUT"),
)
_PRODUCE_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": {
            "type": "object", "required": ["records"],
            "properties": {"records": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "key": {"type": ["string", "null"]}, "value": {},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                    "partition": {"type": ["integer", "null"]},
                    "timestamp": {"type": ["integer", "null"]},
                },
            }}},
        }},
        "application/x-ndjson": {"schema": {"type": "string", "description": "one record per line"}},
    },
}


@router.post(
    "/{topic}/records", summary="Produce records (partition by key or spread)",
    openapi_extra=openapi(PRODUCE_PARAMS, [("topic", "string")], _PRODUCE_BODY),
)
async def produce(request: Request) -> Response:
    q = parse(request.query_params, PRODUCE_PARAMS)
    return await _produce(
        request.app.state.node, request, request.path_params["topic"], None, q["acks"], q["timeout_ms"]
    )


@router.post(
    "/{topic}/partitions/{partition}/records", summary="Produce to one partition",
    openapi_extra=openapi(
        PRODUCE_PARAMS, [("topic", "string"), ("partition", "integer")], _PRODUCE_BODY
    ),
)
async def produce_partition(request: Request) -> Response:
    q = parse(request.query_params, PRODUCE_PARAMS)
    partition = path_int(request.path_params, "partition")
    return await _produce(
        request.app.state.node, request, request.path_params["topic"], partition, q["acks"],
        q["timeout_ms"],
    )


def resolve_offset(
    replica_offset: str | None, timestamp: int | None, committed: bool, replica: object
) -> int:
    from app.partition import PartitionReplica

    assert isinstance(replica, PartitionReplica)
    if timestamp is not None:
        if replica_offset is not None:
            raise ApiError("INVALID_REQUEST", "give offset or timestamp, not both")
        hit = replica.log.offset_for_timestamp(timestamp)
        end = replica.visible_end(committed)
        return end if hit is None else min(hit, end)
    if replica_offset is None or replica_offset == "earliest":
        return replica.log_start_offset
    if replica_offset == "latest":
        return replica.visible_end(committed)
    try:
        value = int(replica_offset)
    except ValueError:
        raise ApiError(
            "INVALID_REQUEST", f"offset must be an integer, 'earliest' or 'latest', not {replica_offset!r}"
        ) from None
    if value < 0:
        raise ApiError("INVALID_REQUEST", "offset must be >= 0")
    return value


FETCH_PARAMS: tuple[Param, ...] = (
    StrParam("offset", "integer, 'earliest' (default) or 'latest'"),
    IntParam("timestamp", None, 0, 2**63 - 1, "start at the first record at or after this time (ms)"),
    IntParam("max_records", 500, 1, 100_000),
    IntParam("max_bytes", 1_048_576, 1, 2**31 - 1, "response budget; at least one record is returned"),
    IntParam("max_wait_ms", 0, 0, 300_000, "long-poll until a record is visible past offset"),
    ChoiceParam("isolation", "committed", ("committed", "uncommitted")),
)


@router.get(
    "/{topic}/partitions/{partition}/records", summary="Fetch records by offset",
    openapi_extra=openapi(FETCH_PARAMS, [("topic", "string"), ("partition", "integer")]),
)
async def fetch(request: Request) -> Response:
    node: Node = request.app.state.node
    topic = request.path_params["topic"]
    partition = path_int(request.path_params, "partition")
    q = parse(request.query_params, FETCH_PARAMS)
    offset, timestamp, isolation = q["offset"], q["timestamp"], q["isolation"]
    max_records, max_bytes, max_wait_ms = q["max_records"], q["max_bytes"], q["max_wait_ms"]
    if not node.leads(topic, partition):
        return await forward(node, request, leader_url(node, topic, partition, request))
    replica = node.replica(topic, partition)
    committed = isolation == "committed"
    start = resolve_offset(offset, timestamp, committed, replica)
    try:
        result = await replica.fetch(
            start, max_records, min(max_bytes, node.settings.max_fetch_bytes), max_wait_ms, committed
        )
    except PartitionGone as e:
        node.topic(topic)  # deleted while the fetch waited: 404 TOPIC_NOT_FOUND, not NOT_LEADER
        raise ApiError("NOT_LEADER", str(e)) from None
    node.metrics.fetch_requests.inc()
    node.metrics.records_fetched.inc(result.count)
    return Response(result.to_json(), media_type=JSON)
