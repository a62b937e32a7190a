"""Batch and streaming writers: DataFrame rows → produce requests.

Each Spark task sends its rows in requests of ``batchSize`` records with
``acks=all`` (default) and returns a :class:`TidelogCommitMessage` with the
counts it wrote. Delivery is **at-least-once**: tidelog has no idempotent or
transactional producer, so a request retried after a timeout or connection
drop, a task retried by Spark, or a streaming micro-batch re-run after a
restart may write some records twice. Nothing written can be rolled back, so
``abort`` only reports what the successful tasks had already written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from app.spark.options import OptionError, WriteOptions

if TYPE_CHECKING:
    from pyspark.sql import Row
    from pyspark.sql.types import StructType

log = logging.getLogger("tidelog.spark")

WRITE_COLUMNS = ("value", "key", "headers", "partition", "topic", "timestamp")
"""Columns the writer understands; any other column is ignored."""


@dataclass
class TidelogCommitMessage(WriterCommitMessage):
    """What one task wrote: totals and per topic-partition record counts."""

    records: int = 0
    requests: int = 0
    per_partition: dict[str, int] = field(default_factory=dict)


def check_write_schema(schema: StructType, opts: WriteOptions) -> None:
    """Fail on the driver, before any task runs, when the columns cannot be written."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        ShortType,
        StringType,
        TimestampType,
    )

    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("tidelog writer needs a value column (string of JSON, or any string)")
    expect: dict[str, tuple[tuple[type, ...], str]] = {
        "value": ((StringType, BinaryType), "string or binary"),
        "key": ((StringType,), "string"),
        "headers": ((MapType,), "map<string,string>"),
        "partition": ((IntegerType, LongType, ShortType), "an integer type"),
        "topic": ((StringType,), "string"),
        "timestamp": ((TimestampType, LongType), "timestamp or bigint (ms)"),
    }
    for name, (allowed, label) in expect.items():
        if name in types and not isinstance(types[name], allowed):
            raise OptionError(f"tidelog writer: column {name} has type "
                              f"{types[name].simpleString()}, expected {label}")
    if opts.topic is None and "topic" not in types:
        raise OptionError("tidelog writer needs the topic option or a topic column")


def _value(raw: Any, fmt: str) -> Any:
    """The JSON value to send for a ``value`` cell, per ``valueFormat``.

    ``auto``: JSON text is sent as that JSON value, anything else as a JSON
    string (so "hello" works, but "123" becomes the number 123). ``json``:
    must parse, else the task fails. ``text``: always a JSON string.
    """
    import orjson

    if isinstance(raw, bytes | bytearray):
        raw = bytes(raw).decode("utf-8")
    if raw is None:
        return None
    if fmt == "text":
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        if fmt == "json":
            raise ValueError(f"tidelog writer: value is not JSON (valueFormat=json): {raw[:80]!r}"
                             ) from None
        return raw


def _record(row: Row, cols: set[str], fmt: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"value": _value(row["value"], fmt)}
    if "key" in cols:
        rec["key"] = row["key"]
    if "headers" in cols and row["headers"] is not None:
        rec["headers"] = {str(k): str(v) for k, v in row["headers"].items() if v is not None}
    if "partition" in cols and row["partition"] is not None:
        rec["partition"] = int(row["partition"])
    if "timestamp" in cols and row["timestamp"] is not None:
        ts = row["timestamp"]
        # Spark hands a naive local datetime; whole seconds + ms avoid float rounding.
        rec["timestamp"] = ts if isinstance(ts, int) else (
            int(ts.timestamp()) * 1000 + ts.microsecond // 1000)
    return rec


def write_rows(opts: WriteOptions, rows: Iterable[Row]) -> TidelogCommitMessage:
    """Produce ``rows`` in batches per topic; runs in an executor task."""
    from app.spark.nodes import NodePool

    msg = TidelogCommitMessage()
    pending: dict[str, list[dict[str, Any]]] = {}
    cols: set[str] | None = None

    def flush(pool: NodePool, topic: str) -> None:
        batch = pending.pop(topic, [])
        if not batch:
            return
        offsets = pool.call(lambda c: c.produce(topic, batch, acks=opts.acks,
                                                timeout_ms=opts.timeout_ms))
        msg.records += len(batch)
        msg.requests += 1
        for o in offsets:
            k = f"{topic}/{o['partition']}"
            msg.per_partition[k] = msg.per_partition.get(k, 0) + 1

    timeout_s = opts.timeout_ms / 1000 + 10
    with NodePool(opts.servers, timeout_s=timeout_s, retries=opts.retries) as pool:
        for row in rows:
            if cols is None:
                cols = set(row.asDict().keys()) & set(WRITE_COLUMNS)
            topic = opts.topic or row["topic"]
            if not topic:
                raise ValueError("tidelog writer: row has no topic (topic column is null and "
                                 "no topic option)")
            pending.setdefault(topic, []).append(_record(row, cols, opts.value_format))
            if len(pending[topic]) >= opts.batch_size:
                flush(pool, topic)
        for topic in list(pending):
            flush(pool, topic)
    return msg


def _total(messages: Iterable[WriterCommitMessage | None]) -> tuple[int, int]:
    ok = [m for m in messages if isinstance(m, TidelogCommitMessage)]
    return sum(m.records for m in ok), len(ok)


class TidelogBatchWriter(DataSourceWriter):
    """``df.write.format("tidelog").mode("append")``."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> TidelogCommitMessage:
        return write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        n, tasks = _total(messages)
        log.info("tidelog: wrote %d records in %d tasks", n, tasks)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        n, tasks = _total(messages)
        log.warning("tidelog: write aborted; %d records from %d finished tasks stay written "
                    "(at-least-once: a retry may duplicate them)", n, tasks)


class TidelogStreamWriter(DataSourceStreamWriter):
    """``writeStream.format("tidelog")``: one produce pass per micro-batch and task."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> TidelogCommitMessage:
        return write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        n, tasks = _total(messages)
        log.info("tidelog: micro-batch %d wrote %d records in %d tasks", batchId, n, tasks)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        n, tasks = _total(messages)
        log.warning("tidelog: micro-batch %d aborted; %d records from %d finished tasks stay "
                    "written and the re-run will write them again", batchId, n, tasks)
