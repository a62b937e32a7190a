"""Shared helpers for the Spark tests: produce known data, read it back as plain tuples."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tests.support.node import NodeProcess

BASE_TS_MS = 1_700_000_000_000
"""Explicit record timestamps, so rows can be compared exactly."""

COLUMNS = ("key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts")


def produce_known(node: NodeProcess, topic: str, per_partition: dict[int, int],
                  headers: bool = True) -> list[tuple[Any, ...]]:
    """Produce ``n`` records to each partition; return the rows a full read must yield.

    Row tuples follow ``COLUMNS`` (+ headers), sorted by partition and offset.
    Values alternate between objects, strings, numbers and null so the JSON
    text encoding of every kind is checked.
    """
    expected: list[tuple[Any, ...]] = []
    with node.client() as c:
        for p, n in per_partition.items():
            recs = []
            for i in range(n):
                value: Any = [{"p": p, "i": i}, f"s{i}", i * 1.5, None][i % 4]
                rec: dict[str, Any] = {"key": None if i % 5 == 4 else f"k{p}-{i}", "value": value,
                                       "partition": p, "timestamp": BASE_TS_MS + 1000 * p + i}
                if headers:
                    rec["headers"] = {"i": str(i)}
                recs.append(rec)
            offsets = c.produce(topic, recs)
            for rec, o in zip(recs, offsets, strict=True):
                text = _json_text(rec["value"])
                row: tuple[Any, ...] = (rec["key"], text, topic, p, o["offset"], rec["timestamp"])
                if headers:
                    row += (rec["headers"],)
                expected.append(row)
    return sorted(expected, key=lambda r: (r[2], r[3], r[4]))


def _json_text(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()


def reader(spark: SparkSession, servers: str, topic: str, **options: Any) -> Any:
    r = spark.read.format("tidelog").option("servers", servers).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, str(v) if not isinstance(v, bool) else str(v).lower())
    return r


def rows(df: DataFrame, headers: bool = False) -> list[tuple[Any, ...]]:
    """Collect as plain tuples in (topic, partition, offset) order; timestamps as epoch ms."""
    cols = list(COLUMNS) + (["headers"] if headers else [])
    out = [tuple(r) for r in df.selectExpr(*cols).collect()]
    return sorted(out, key=lambda r: (r[2], r[3], r[4]))
