"""One webhook delivery → one record: value, headers, key and delivery id.

The value is what a consumer most likely wants: a JSON body as the JSON value
(``parse_json``), other UTF-8 text as a string, anything else as base64 text.
The header ``tidelog-body`` says which (``json``, ``text`` or ``base64``), so
a consumer can always get back the exact bytes of a text or binary body.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.hooks.config import HookConfig, ValueSource

BODY_HEADER = "tidelog-body"
DELIVERY_HEADER = "tidelog-delivery-id"
MAX_ID_CHARS = 256


@dataclass(frozen=True, slots=True)
class Delivery:
    """The record to store for one delivery, and the id that dedupes it (None: no dedupe)."""

    record: dict[str, Any]
    delivery_id: str | None
    key: str | None


def _is_json(content_type: str) -> bool:
    ctype = content_type.split(";", 1)[0].strip().lower()
    return ctype == "application/json" or ctype.endswith("+json") or ctype == "text/json"


def resolve_pointer(doc: Any, pointer: str) -> Any:
    """RFC 6901 JSON pointer lookup; ``None`` when the path does not exist."""
    if pointer == "":
        return doc
    cur = doc
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict):
            if token not in cur:
                return None
            cur = cur[token]
        elif isinstance(cur, list):
            if not token.isdigit() or int(token) >= len(cur):
                return None
            cur = cur[int(token)]
        else:
            return None
    return cur


def _as_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        s = v
    elif isinstance(v, bool | int | float):
        s = orjson.dumps(v).decode()
    else:
        s = orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()
    return s[:MAX_ID_CHARS] if s else None


def _source(src: ValueSource | None, headers: Mapping[str, str], doc: Any, parsed: bool) -> str | None:
    if src is None:
        return None
    if src.header is not None:
        return _as_text(headers.get(src.header.lower()))
    if not parsed or src.json_pointer is None:
        return None
    return _as_text(resolve_pointer(doc, src.json_pointer))


def build_delivery(cfg: HookConfig, headers: Mapping[str, str], body: bytes) -> Delivery:
    """``headers`` must be case-insensitive (Starlette's are) or lower-case keyed."""
    doc: Any = None
    parsed = False
    kind = "base64"
    value: Any
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and _is_json(headers.get("content-type", "")):
        try:
            doc = orjson.loads(body)
            parsed = True
        except orjson.JSONDecodeError:
            parsed = False
    if parsed and cfg.parse_json:
        value, kind = doc, "json"
    elif text is not None:
        value, kind = text, "text"
    else:
        value = base64.b64encode(body).decode("ascii")
    rec_headers = {h: headers[h] for h in cfg.keep_headers if h in headers}
    rec_headers[BODY_HEADER] = kind
    delivery_id = _source(cfg.effective_delivery_id(), headers, doc, parsed)
    key = _source(cfg.key, headers, doc, parsed) if cfg.key is not None else delivery_id
    if delivery_id is not None:
        rec_headers[DELIVERY_HEADER] = delivery_id
    return Delivery({"key": key, "value": value, "headers": rec_headers}, delivery_id, key)
