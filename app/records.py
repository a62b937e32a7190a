"""JSON records in and out: produce parsing and fetch rendering.

Hot path. Produce: one ``orjson.loads`` of the body, a cheap per-record
check, one ``orjson.dumps`` per record of the body that will be served.
Fetch: responses are spliced from stored bodies with ``bytes`` formatting;
no record is decoded on the way out (see app/storage/batch.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, NamedTuple

import orjson

from app.errors import ApiError
from app.storage.batch import iter_records, slice_records

_ALLOWED = frozenset(("key", "value", "headers", "partition", "timestamp"))
_INT64_MAX = 2**63 - 1


class ProducedRecord(NamedTuple):
    """A validated record ready to append.

    A tuple whose first three fields are what storage takes (key bytes,
    body, timestamp), so a list of these goes to ``append_records`` as is.
    """

    key_bytes: bytes | None
    body: bytes
    timestamp: int
    partition: int | None


def _bad(detail: str) -> ApiError:
    return ApiError("INVALID_REQUEST", detail)


def parse_json_body(body: bytes) -> list[Any]:
    """``{"records": [...]}`` → the list; INVALID_REQUEST on anything else."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise _bad(f"malformed JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        raise _bad('body must be an object with a "records" array')
    extra = doc.keys() - {"records"}
    if extra:
        raise _bad(f"unknown fields {sorted(extra)}")
    return doc["records"]


def parse_ndjson_body(body: bytes) -> list[Any]:
    """One record object per non-blank line; the error names the bad line."""
    out: list[Any] = []
    for n, line in enumerate(body.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError as e:
            raise _bad(f"malformed JSON on line {n}: {e}") from None
    return out


def validate_records(raw: list[Any], now_ms: int, num_partitions: int) -> list[ProducedRecord]:
    """Check every record before anything is written (a bad record stores nothing).

    The stored body is the record's own JSON when it holds only served
    fields (one ``orjson.dumps`` per record, the hot path), with absent
    ``key``/``value``/``headers`` added as defaults in front; a record
    naming its partition or timestamp is re-built without them.
    """
    if not raw:
        raise _bad("no records")
    out: list[ProducedRecord] = []
    append = out.append
    dumps = orjson.dumps
    allowed = _ALLOWED
    for i, r in enumerate(raw):
        if type(r) is not dict:
            raise _bad(f"records[{i}] must be an object")
        if not r.keys() <= allowed:
            raise _bad(f"records[{i}] has unknown fields {sorted(r.keys() - allowed)}")
        key = r.get("key")
        if key is not None and type(key) is not str:
            raise _bad(f"records[{i}].key must be a string or null")
        headers = r.get("headers")
        if headers is not None and (
            type(headers) is not dict or not all(type(v) is str for v in headers.values())
        ):
            raise _bad(f"records[{i}].headers must map strings to strings")
        partition = r.get("partition")
        ts = r.get("timestamp")
        fast = partition is None and ts is None and "partition" not in r and "timestamp" not in r
        if fast and (headers is not None or "headers" not in r):
            body = dumps(r)
            missing = _MISSING[tuple(r)] if len(r) < 3 else b""
            if missing:
                body = missing + body[1:] if len(body) > 2 else missing[:-1] + b"}"
            append(ProducedRecord(key.encode() if key is not None else None, body, now_ms, None))
            continue
        if partition is not None and (
            type(partition) is not int or not 0 <= partition < num_partitions
        ):
            raise ApiError(
                "PARTITION_NOT_FOUND" if type(partition) is int else "INVALID_REQUEST",
                f"records[{i}].partition {partition!r} is not a partition of this topic "
                f"(0..{num_partitions - 1})",
            )
        if ts is None:
            ts = now_ms
        elif type(ts) is not int or not 0 <= ts <= _INT64_MAX:
            raise _bad(f"records[{i}].timestamp must be a non-negative integer (ms)")
        body = dumps({"key": key, "value": r.get("value"), "headers": headers or {}})
        append(ProducedRecord(key.encode() if key is not None else None, body, ts, partition))
    return out


def _missing_prefixes() -> dict[tuple[str, ...], bytes]:
    """For each ordering of fewer than three served fields a record may hold
    (keyed like ``tuple(record)``), the JSON of the absent ones."""
    defaults = {"key": b'"key":null,', "value": b'"value":null,', "headers": b'"headers":{},'}
    names = ("key", "value", "headers")
    out: dict[tuple[str, ...], bytes] = {}
    for n in range(3):
        for present in itertools.permutations(names, n):
            out[present] = b"{" + b"".join(defaults[k] for k in names if k not in present)
    return out


_MISSING = _missing_prefixes()


def render_records(
    data: bytes,
    start_offset: int,
    upto_offset: int,
    max_records: int,
    max_bytes: int,
    min_one: bool = True,
) -> tuple[list[memoryview], int, int, int]:
    """Served JSON for records in ``[start_offset, upto_offset)`` of raw batches.

    Returns ``(chunks, count, next_offset, size)``: each chunk is a
    comma-separated run of record objects (one per batch), to be joined with
    commas into the response array. See ``slice_records``.
    """
    return slice_records(data, start_offset, upto_offset, max_records, max_bytes, min_one)


def iter_record_dicts(data: bytes, start_offset: int) -> Iterator[dict[str, Any]]:
    """Decoded records (for tooling and tests; not the hot path)."""
    for off, _ts, _epoch, rec in iter_records(data):
        if off >= start_offset:
            yield orjson.loads(rec)
