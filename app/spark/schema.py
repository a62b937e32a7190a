"""The row schema of a tidelog DataFrame and the Arrow batches that fill it.

Reads yield ``pyarrow.RecordBatch`` es rather than Python tuples: Spark's
tuple path converts value by value in Python, which costs more than the HTTP
fetch itself. The Arrow schema is derived from the Spark schema with
PySpark's own converter, so it always equals the one Spark checks against.

Value encoding (decided here, documented in the README):

* ``value`` is the record's JSON value as compact JSON text, always; a JSON
  string value keeps its quotes (``"hello"`` arrives as ``"\\"hello\\""``).
  That keeps the column lossless and round-trippable (``from_json`` works,
  and ``1`` vs ``"1"`` stay distinct). The writer's default ``valueFormat=auto``
  turns such text back into the same JSON value.
* ``value_binary`` is the same text as UTF-8 bytes, for code written against
  Spark's Kafka source (``CAST(value_binary AS STRING)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

BASE_COLUMNS = ("key", "value", "value_binary", "topic", "partition", "offset", "timestamp")


def tidelog_schema(include_headers: bool) -> StructType:
    """The read schema; ``headers`` is appended only with ``includeHeaders=true`` (as in Kafka)."""
    from pyspark.sql.types import (
        BinaryType,
        IntegerType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", StringType(), True),
        StructField("value", StringType(), True),
        StructField("value_binary", BinaryType(), True),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("timestamp", TimestampType(), False),
    ]
    if include_headers:
        fields.append(StructField("headers", MapType(StringType(), StringType(), True), True))
    return StructType(fields)


def check_schema(schema: StructType, include_headers: bool) -> None:
    """Refuse a user-supplied schema that differs: the source's columns are fixed."""
    want = tidelog_schema(include_headers).fieldNames()
    if schema.fieldNames() != want:
        raise ValueError(
            f"tidelog: the read schema is fixed ({', '.join(want)}); "
            f"do not pass .schema(...), got {', '.join(schema.fieldNames())}"
        )


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for ``schema`` (UTC timestamps, as Spark's check uses)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def to_batch(records: Sequence[dict[str, Any]], topic: str, partition: int,
             schema: pa.Schema) -> pa.RecordBatch:
    """One fetched page → one RecordBatch in ``schema``'s column order."""
    import orjson
    import pyarrow as pa

    n = len(records)
    texts = [orjson.dumps(r["value"]) for r in records]
    cols: dict[str, pa.Array] = {
        "key": pa.array([r.get("key") for r in records], schema.field("key").type),
        "value": pa.array([t.decode() for t in texts], schema.field("value").type),
        "value_binary": pa.array(texts, schema.field("value_binary").type),
        "topic": pa.array([topic] * n, schema.field("topic").type),
        "partition": pa.array([partition] * n, schema.field("partition").type),
        "offset": pa.array([r["offset"] for r in records], schema.field("offset").type),
        "timestamp": pa.array([r["timestamp"] for r in records], pa.int64())
        .cast(pa.timestamp("ms", tz="UTC"))
        .cast(schema.field("timestamp").type),
    }
    if "headers" in schema.names:
        cols["headers"] = pa.array(
            [list((r.get("headers") or {}).items()) for r in records], schema.field("headers").type
        )
    return pa.RecordBatch.from_arrays([cols[name] for name in schema.names], schema=schema)
