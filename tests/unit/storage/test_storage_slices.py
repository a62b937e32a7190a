"""Serving records by slicing batches equals rendering them one by one."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from app.storage.batch import encode_batch, iter_records, render_record, slice_records


def build(sizes: list[int], values: st.DataObject) -> tuple[bytes, list[bytes]]:
    data = b""
    served: list[bytes] = []
    off = 0
    for n in sizes:
        recs = []
        for i in range(n):
            v = values.draw(st.one_of(st.integers(-(2**63), 2**64 - 1), st.text(max_size=30), st.none()))
            body = orjson.dumps({"key": f"k{off + i}", "value": v, "headers": {}})
            recs.append((None, body, 1000 + off + i))
            served.append(render_record(off + i, 1000 + off + i, 7, body))
        data += encode_batch(off, 7, recs)
        off += n
    return data, served


def reference(served: list[bytes], start: int, upto: int, max_records: int, max_bytes: int,
              min_one: bool) -> tuple[list[bytes], int]:
    """Record-at-a-time rule: take records while the JSON array payload fits."""
    out: list[bytes] = []
    size = 0
    for off in range(start, min(upto, len(served))):
        if len(out) >= max_records:
            break
        rec = served[off]
        if size + len(rec) + 1 > max_bytes and (out or not min_one):
            break
        out.append(rec)
        size += len(rec) + 1
    return out, start + len(out)


@settings(max_examples=1000, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=6),
    data=st.data(),
)
def test_slices_join_to_exactly_the_records_a_per_record_renderer_would_serve(
    sizes: list[int], data: st.DataObject
) -> None:
    raw, served = build(sizes, data)
    total = len(served)
    start = data.draw(st.integers(0, total))
    upto = data.draw(st.integers(start, total + 2))
    max_records = data.draw(st.integers(1, total + 2))
    max_bytes = data.draw(st.integers(1, 4000))
    min_one = data.draw(st.booleans())
    chunks, count, nxt, size = slice_records(raw, start, upto, max_records, max_bytes, min_one)
    want, want_next = reference(served, start, upto, max_records, max_bytes, min_one)
    joined = b",".join(bytes(c) for c in chunks)
    assert orjson.loads(b"[" + joined + b"]") == [orjson.loads(r) for r in want]
    assert joined == b",".join(want)
    assert count == len(want) and nxt == want_next
    assert size == sum(len(r) + 1 for r in want)


def test_iter_records_yields_the_served_json_with_offsets() -> None:
    body = orjson.dumps({"key": None, "value": {"a": [1, 2]}, "headers": {"h": "v"}})
    raw = encode_batch(41, 3, [(None, body, 5), (b"k", body, 6)])
    got = [(o, ts, e, orjson.loads(r)) for o, ts, e, r in iter_records(raw)]
    assert got == [
        (41, 5, 3, {"offset": 41, "timestamp": 5, "leader_epoch": 3, "key": None,
                    "value": {"a": [1, 2]}, "headers": {"h": "v"}}),
        (42, 6, 3, {"offset": 42, "timestamp": 6, "leader_epoch": 3, "key": None,
                    "value": {"a": [1, 2]}, "headers": {"h": "v"}}),
    ]
