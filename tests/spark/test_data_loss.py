"""failOnDataLoss: records removed by retention between micro-batches."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tests.spark.helpers import reader
from tests.support.node import NodeProcess

pytestmark = pytest.mark.spark

TOPIC = "shrinking"


def _fill(node: NodeProcess, start: int, n: int) -> None:
    with node.client() as c:
        for i in range(start, start + n, 10):
            c.produce(TOPIC, [{"key": f"k{j}", "value": {"pad": "x" * 60, "j": j}}
                              for j in range(i, min(i + 10, start + n))])


def _log_start(node: NodeProcess) -> int:
    with node.client() as c:
        return int(c.describe_topic(TOPIC)["partitions"][0]["log_start_offset"])


def _wait_log_start_past(node: NodeProcess, offset: int, timeout_s: float = 60) -> int:
    """Poll until retention has deleted segments past ``offset`` (a deadline, not a sleep)."""
    deadline = time.monotonic() + timeout_s
    while (lso := _log_start(node)) <= offset:
        assert time.monotonic() < deadline, f"retention never passed offset {offset}"
        time.sleep(0.05)
    return lso


@pytest.fixture
def retention_node(node_factory: Callable[..., NodeProcess]) -> NodeProcess:
    n = node_factory(env={"TIDELOG_RETENTION_CHECK_INTERVAL_MS": "100"})
    with n.client() as c:
        c.create_topic(TOPIC, config={"segment_bytes": 1024, "retention_bytes": 2048})
    return n


def _stream(spark: SparkSession, node: NodeProcess, ckpt: Path, seen: list[int],
            **options: str) -> None:
    def collect(df: DataFrame, batch_id: int) -> None:
        seen.extend(r.offset for r in df.select("offset").collect())

    s = (spark.readStream.format("tidelog").option("servers", node.url).option("topic", TOPIC)
         .option("startingOffsets", "earliest"))
    for k, v in options.items():
        s = s.option(k, v)
    q = (s.load().writeStream.foreachBatch(collect).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)


@pytest.mark.slow
def test_records_removed_between_batches_fail_the_query_or_are_skipped(
    spark: SparkSession, retention_node: NodeProcess, tmp_path: Path
) -> None:
    node = retention_node
    _fill(node, 0, 5)
    ckpt = tmp_path / "ckpt"
    seen: list[int] = []
    _stream(spark, node, ckpt, seen)
    assert seen == [0, 1, 2, 3, 4]

    _fill(node, 5, 200)  # ~100 bytes a record: many 1 KiB segments, retention keeps ~2 KiB
    lso_before = _wait_log_start_past(node, 5)

    with pytest.raises(StreamingQueryException, match="failOnDataLoss=false"):
        _stream(spark, node, ckpt, [])

    seen = []
    _stream(spark, node, ckpt, seen, failOnDataLoss="false")
    lso_after = _log_start(node)
    assert seen, "nothing read after skipping the lost records"
    assert lso_before <= min(seen) <= lso_after
    assert sorted(seen) == list(range(min(seen), 205))


@pytest.mark.slow
def test_batch_start_before_log_start_fails_or_clamps(
    spark: SparkSession, retention_node: NodeProcess
) -> None:
    node = retention_node
    _fill(node, 0, 200)
    lso = _wait_log_start_past(node, 0)
    start = f'{{"{TOPIC}": {{"0": 0}}}}'
    with pytest.raises(PySparkException, match="before its log start"):
        reader(spark, node.url, TOPIC, startingOffsets=start).load().collect()
    offsets = [r.offset for r in reader(spark, node.url, TOPIC, startingOffsets=start,
                                        failOnDataLoss=False).load().collect()]
    assert offsets and min(offsets) >= lso and sorted(offsets) == list(range(min(offsets), 200))
