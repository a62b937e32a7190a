"""Batch reads against a real node: exact rows, offset ranges, timestamps, failover."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from tests.spark.helpers import BASE_TS_MS, produce_known, reader, rows
from tests.support.node import NodeProcess, free_port

pytestmark = pytest.mark.spark


def test_batch_read_yields_every_record_once_with_exact_columns(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    with shared_node.client() as c:
        c.create_topic(topic, partitions=2)
    expected = produce_known(shared_node, topic, {0: 7, 1: 5})
    df = reader(spark, shared_node.url, topic, includeHeaders=True,
                maxRecordsPerPartition=3).load()

    assert rows(df, headers=True) == expected
    # 7 records → 3 ranges (3+3+1), 5 records → 2 ranges (3+2).
    assert df.rdd.getNumPartitions() == 5
    pairs = [(r.value, bytes(r.value_binary)) for r in df.select("value", "value_binary").collect()]
    assert len(pairs) == 12
    assert all(text.encode() == raw for text, raw in pairs)


def test_json_string_values_keep_their_quotes(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    with shared_node.client() as c:
        c.create_topic(topic)
        c.produce(topic, [{"value": v} for v in ["hello", "1", 1, True, None, {"a": [1, 2]}]])
    got = [r.value for r in reader(spark, shared_node.url, topic).load().orderBy("offset").collect()]
    assert got == ['"hello"', '"1"', "1", "true", "null", '{"a":[1,2]}']


def test_offset_ranges_from_json_with_sentinels(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    with shared_node.client() as c:
        c.create_topic(topic, partitions=2)
    produce_known(shared_node, topic, {0: 10, 1: 4}, headers=False)
    df = reader(spark, shared_node.url, topic,
                startingOffsets=f'{{"{topic}": {{"0": 3, "1": -2}}}}',
                endingOffsets=f'{{"{topic}": {{"0": 7, "1": -1}}}}').load()
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(4)]

    # Partitions the JSON leaves out start at earliest and end at latest.
    df = reader(spark, shared_node.url, topic, startingOffsets=f'{{"{topic}": {{"0": 8}}}}').load()
    got = sorted((r.partition, r.offset) for r in df.collect())
    assert got == [(0, 8), (0, 9)] + [(1, o) for o in range(4)]

    assert reader(spark, shared_node.url, topic, startingOffsets="latest").load().count() == 0
    assert reader(spark, shared_node.url, topic, startingOffsets="earliest",
                  endingOffsets="latest").load().count() == 14


@pytest.mark.slow
def test_starting_timestamp_picks_the_first_record_at_or_after(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    with shared_node.client() as c:
        c.create_topic(topic, partitions=2)
    produce_known(shared_node, topic, {0: 6, 1: 6}, headers=False)
    # Partition 0 has BASE+0..5, partition 1 has BASE+1000..1005.
    df = reader(spark, shared_node.url, topic, startingTimestamp=BASE_TS_MS + 4).load()
    assert sorted((r.partition, r.offset) for r in df.collect()) == (
        [(0, 4), (0, 5)] + [(1, o) for o in range(6)]
    )


@pytest.mark.slow
def test_several_topics_and_unreachable_servers(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    left, right = f"{topic}-l", f"{topic}-r"
    with shared_node.client() as c:
        c.create_topic(left)
        c.create_topic(right, partitions=2)
    expected = produce_known(shared_node, left, {0: 3}) + produce_known(
        shared_node, right, {0: 2, 1: 2})
    dead = f"http://127.0.0.1:{free_port()}"  # refused: the source must move on to the next URL
    df = reader(spark, f"{dead},{shared_node.url}", f"{left},{right}", includeHeaders=True).load()
    assert rows(df, headers=True) == sorted(expected, key=lambda r: (r[2], r[3], r[4]))


def test_bad_options_fail_before_reading(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    with shared_node.client() as c:
        c.create_topic(topic)
        c.produce(topic, [{"value": 1}])
    cases = [
        ({"startingOffsets": '{"nope": {"0": 1}}'}, "not in option topic"),
        ({"startingOffsets": f'{{"{topic}": {{"5": 0}}}}'}, f"{topic}/5, which does not exist"),
        ({"endingOffsets": "earliest"}, "cannot be earliest"),
        ({"endingOffsets": f'{{"{topic}": {{"0": 99}}}}'}, "past its end"),
        ({"isolation": "dirty"}, "isolation must be"),
        ({"maxRecordsPerPartition": "0"}, "must be >= 1"),
    ]
    for options, message in cases:
        with pytest.raises(PySparkException, match=message):
            reader(spark, shared_node.url, topic, **options).load().collect()
    with pytest.raises(PySparkException, match="topic 'ghost' does not exist"):
        reader(spark, shared_node.url, "ghost").load().collect()
