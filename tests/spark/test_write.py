"""Writes: batch and streaming, read back exactly; per-task commit messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import Row, SparkSession

from app.spark.options import WriteOptions
from app.spark.writer import TidelogBatchWriter, TidelogCommitMessage
from tests.spark.helpers import produce_known, reader
from tests.support.node import NodeProcess

pytestmark = pytest.mark.spark


def test_batch_write_then_read_back(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    with shared_node.client() as c:
        c.create_topic(topic, partitions=2)
    data = [
        ("a", '{"n": 1}', {"src": "t"}, 0),
        ("b", "plain text", None, 1),
        (None, '"quoted"', {}, 1),
        ("c", "[1, 2]", None, 0),
        ("d", "42", {"x": "y"}, 0),
    ]
    df = spark.createDataFrame(data, "key string, value string, headers map<string,string>, "
                                     "partition int")
    (df.write.format("tidelog").option("servers", shared_node.url).option("topic", topic)
     .option("batchSize", 2).mode("append").save())

    back = reader(spark, shared_node.url, topic, includeHeaders=True).load().collect()
    got = sorted(((r.partition, r.key, r.value, r.headers) for r in back), key=str)
    assert got == sorted([
        (0, "a", '{"n":1}', {"src": "t"}),
        (1, "b", '"plain text"', {}),   # not JSON → sent as a JSON string (valueFormat=auto)
        (1, None, '"quoted"', {}),
        (0, "c", "[1,2]", {}),
        (0, "d", "42", {"x": "y"}),
    ], key=str)
    # Per-partition order follows the DataFrame within each task; each offset is used once.
    assert sorted((r.partition, r.offset) for r in back) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]


@pytest.mark.slow
def test_read_then_write_copies_a_topic_losslessly(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    src, dst = f"{topic}-src", f"{topic}-dst"
    with shared_node.client() as c:
        c.create_topic(src, partitions=2)
        c.create_topic(dst, partitions=2)
    produce_known(shared_node, src, {0: 6, 1: 4})
    df = reader(spark, shared_node.url, src, includeHeaders=True).load()
    (df.select("key", "value", "headers", "partition", "timestamp").write.format("tidelog")
     .option("servers", shared_node.url).option("topic", dst).mode("append").save())

    def content(t: str) -> list[tuple[object, ...]]:
        d = reader(spark, shared_node.url, t, includeHeaders=True).load()
        return sorted(tuple(r) for r in d.selectExpr(
            "partition", "offset", "key", "value", "headers", "unix_millis(timestamp)").collect())

    assert content(dst) == content(src)


def test_writer_rejects_unusable_input_on_the_driver(
    spark: SparkSession, shared_node: NodeProcess, topic: str
) -> None:
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(PySparkException, match="column value has type int"):
        df.write.format("tidelog").option("servers", shared_node.url).option(
            "topic", topic).mode("append").save()
    df = spark.createDataFrame([("x",)], "value string")
    with pytest.raises(PySparkException, match="topic option or a topic column"):
        df.write.format("tidelog").option("servers", shared_node.url).mode("append").save()
    with pytest.raises(PySparkException, match="append-only"):
        df.write.format("tidelog").option("servers", shared_node.url).option(
            "topic", topic).mode("overwrite").save()


def test_task_commit_message_counts_what_it_wrote(shared_node: NodeProcess, topic: str) -> None:
    """The executor-side ``write`` called directly with real Rows against the real node."""
    with shared_node.client() as c:
        c.create_topic(topic, partitions=2)
    opts = WriteOptions.parse({"servers": shared_node.url, "topic": topic, "batchSize": "3"})
    rows = [Row(key=None, value=f'{{"i": {i}}}', partition=i % 2) for i in range(7)]
    msg = TidelogBatchWriter(opts).write(iter(rows))
    assert isinstance(msg, TidelogCommitMessage)
    assert (msg.records, msg.requests) == (7, 3)
    assert msg.per_partition == {f"{topic}/0": 4, f"{topic}/1": 3}


@pytest.mark.slow
def test_streaming_copy_writes_each_record_once(
    spark: SparkSession, shared_node: NodeProcess, topic: str, tmp_path: Path
) -> None:
    src, dst = f"{topic}-src", f"{topic}-dst"
    with shared_node.client() as c:
        c.create_topic(src, partitions=2)
        c.create_topic(dst)
    produce_known(shared_node, src, {0: 5, 1: 5}, headers=False)

    def run() -> None:
        q = (spark.readStream.format("tidelog").option("servers", shared_node.url)
             .option("topic", src).option("startingOffsets", "earliest").load()
             .selectExpr("key", "value").writeStream.format("tidelog")
             .option("servers", shared_node.url).option("topic", dst)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(180)

    run()
    with shared_node.client() as c:
        c.produce(src, [{"key": "late", "value": {"late": True}, "partition": 1}])
    run()
    src_rows = reader(spark, shared_node.url, src).load().select("key", "value").collect()
    dst_rows = reader(spark, shared_node.url, dst).load().select("key", "value").collect()
    assert sorted(map(tuple, dst_rows), key=str) == sorted(map(tuple, src_rows), key=str)
    assert len(dst_rows) == 11
