"""PySpark data source ``tidelog``: read topics as DataFrames, write DataFrames to topics.

Register once per session, then use it like Spark's Kafka source::

    from app.spark import register
    register(spark)                       # spark.dataSource.register(TidelogDataSource)
    df = (spark.read.format("tidelog")
          .option("servers", "http://127.0.0.1:8080").option("topic", "events").load())

Batch and streaming reads, batch and streaming writes (PySpark >= 4.2 for
read limits and ``Trigger.AvailableNow``). Reads are exactly-once with a
checkpoint: offsets are the per-partition next offsets, and each range is
re-fetched deterministically. Writes are **at-least-once**: a produce request
retried after a timeout or dropped connection, a Spark task retry, or a
streaming micro-batch re-run after a failure can write records twice, because
tidelog has no idempotent producer; nothing written is rolled back on abort.
See ``app/spark/README.md`` for every option and the schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.spark.source import TidelogDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["TidelogDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Make ``format("tidelog")`` available in ``spark`` (idempotent)."""
    spark.dataSource.register(TidelogDataSource)
