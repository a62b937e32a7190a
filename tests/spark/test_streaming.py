"""Streaming reads: AvailableNow, checkpoint restart, read limits, topics that appear later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.spark.helpers import produce_known
from tests.support.node import NodeProcess

pytestmark = pytest.mark.spark

QUERY_TIMEOUT_S = 180
"""A deadline for an AvailableNow query to finish by itself, not a sleep."""


def run_available_now(spark: SparkSession, servers: str, topic: str, checkpoint: Path,
                      **options: Any) -> list[tuple[int, list[tuple[Any, ...]]]]:
    """Run one AvailableNow query; return each micro-batch's (batch id, sorted rows)."""
    batches: list[tuple[int, list[tuple[Any, ...]]]] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        got = [tuple(r) for r in df.select("topic", "partition", "offset", "key", "value").collect()]
        batches.append((batch_id, sorted(got)))

    stream = (spark.readStream.format("tidelog").option("servers", servers)
              .option("topic", topic).option("startingOffsets", "earliest"))
    for k, v in options.items():
        stream = stream.option(k, str(v))
    q = (stream.load().writeStream.foreachBatch(collect)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(QUERY_TIMEOUT_S), "AvailableNow query did not finish in time"
    return batches


def flat(batches: list[tuple[int, list[tuple[Any, ...]]]]) -> list[tuple[Any, ...]]:
    return sorted(r for _, rs in batches for r in rs)


def expected_rows(expected: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """produce_known rows → the (topic, partition, offset, key, value) shape collected here."""
    return sorted((r[2], r[3], r[4], r[0], r[1]) for r in expected)


def test_restart_from_checkpoint_reads_exactly_the_new_records(
    spark: SparkSession, shared_node: NodeProcess, topic: str, tmp_path: Path
) -> None:
    with shared_node.client() as c:
        c.create_topic(topic, partitions=2)
    first = produce_known(shared_node, topic, {0: 4, 1: 3}, headers=False)
    ckpt = tmp_path / "ckpt"

    got = run_available_now(spark, shared_node.url, topic, ckpt)
    assert flat(got) == expected_rows(first)

    # Nothing new: a restart runs no batch with data.
    assert flat(run_available_now(spark, shared_node.url, topic, ckpt)) == []

    with shared_node.client() as c:
        offs = c.produce(topic, [{"key": f"n{i}", "value": {"n": i}, "partition": i % 2}
                                 for i in range(5)])
    got = run_available_now(spark, shared_node.url, topic, ckpt)
    assert flat(got) == sorted(
        (topic, o["partition"], o["offset"], f"n{i}", f'{{"n":{i}}}') for i, o in enumerate(offs)
    )


def test_max_records_per_trigger_splits_the_backlog(
    spark: SparkSession, shared_node: NodeProcess, topic: str, tmp_path: Path
) -> None:
    with shared_node.client() as c:
        c.create_topic(topic, partitions=2)
    expected = produce_known(shared_node, topic, {0: 5, 1: 5}, headers=False)
    got = run_available_now(spark, shared_node.url, topic, tmp_path / "ckpt",
                            maxRecordsPerTrigger=4)
    sizes = [len(rs) for _, rs in sorted(got)]
    assert sizes == [4, 4, 2]
    assert flat(got) == expected_rows(expected)


@pytest.mark.slow
def test_topic_created_later_is_read_from_earliest(
    spark: SparkSession, shared_node: NodeProcess, topic: str, tmp_path: Path
) -> None:
    old, new = f"{topic}-old", f"{topic}-new"
    with shared_node.client() as c:
        c.create_topic(old)
    a = produce_known(shared_node, old, {0: 3}, headers=False)
    ckpt = tmp_path / "ckpt"
    # The subscription names a topic that does not exist yet: not an error when streaming.
    assert flat(run_available_now(spark, shared_node.url, f"{old},{new}", ckpt)) == expected_rows(a)

    with shared_node.client() as c:
        c.create_topic(new, partitions=2)
    b = produce_known(shared_node, new, {0: 2, 1: 3}, headers=False)
    more = produce_known(shared_node, old, {0: 2}, headers=False)
    got = run_available_now(spark, shared_node.url, f"{old},{new}", ckpt)
    assert flat(got) == expected_rows(b + more)


@pytest.mark.slow
def test_processing_time_trigger_sees_records_produced_while_running(
    spark: SparkSession, shared_node: NodeProcess, topic: str, tmp_path: Path
) -> None:
    """A long-running query picks up each new produce in a later micro-batch."""
    import time

    with shared_node.client() as c:
        c.create_topic(topic)
    seen: list[int] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        seen.extend(r.offset for r in df.select("offset").collect())

    q = (spark.readStream.format("tidelog").option("servers", shared_node.url)
         .option("topic", topic).option("startingOffsets", "earliest").load()
         .writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "c"))
         .trigger(processingTime="200 milliseconds").start())
    try:
        for round_ in range(3):
            with shared_node.client() as c:
                c.produce(topic, [{"value": round_}, {"value": round_}])
            want = 2 * (round_ + 1)
            deadline = time.monotonic() + QUERY_TIMEOUT_S
            while len(seen) < want and q.isActive and time.monotonic() < deadline:
                q.awaitTermination(0.2)  # polls the query; returns early if it dies
            assert q.exception() is None
            assert sorted(seen) == list(range(want))
    finally:
        q.stop()
