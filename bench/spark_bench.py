"""Throughput of the ``tidelog`` Spark data source against a local node it starts itself.

    .venv/bin/python -m bench.spark_bench [--records 50000] [--runs 3] [--partitions 2]

Write: a DataFrame of ``--records`` rows (key + small JSON value) saved with
``df.write.format("tidelog")`` (acks=all, 1000 rows per request) into a new
topic. Read: a batch read of that topic into Spark's ``noop`` sink, so every
row is fetched and converted but nothing else is timed. One warm-up round
(JVM, Python workers) is not counted; medians of ``--runs`` rounds are printed.
Spark runs ``local[2]``; numbers include Spark job scheduling, so small
``--records`` understate steady-state throughput.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.support.node import NodeProcess


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="tidelog Spark source/sink throughput")
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from app.spark import register

    with tempfile.TemporaryDirectory(prefix="tidelog-spark-bench-") as tmp:
        node = NodeProcess(Path(tmp) / "node", env={"TIDELOG_LOG_LEVEL": "warning"})
        node.start()
        spark = (SparkSession.builder.master("local[2]").appName("tidelog-bench")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        try:
            source = (spark.range(args.records, numPartitions=args.partitions)
                      .selectExpr("concat('k', id % 100) AS key",
                                  "to_json(named_struct('id', id, 'pad', 'xxxxxxxxxxxxxxxx')) AS value",
                                  f"CAST(id % {args.partitions} AS INT) AS partition")
                      .cache())
            source.count()
            writes: list[float] = []
            reads: list[float] = []
            for run in range(args.runs + 1):
                topic = f"bench-{run}"
                with node.client() as c:
                    c.create_topic(topic, partitions=args.partitions)
                t0 = time.perf_counter()
                (source.write.format("tidelog").option("servers", node.url)
                 .option("topic", topic).mode("append").save())
                t_write = time.perf_counter() - t0
                t0 = time.perf_counter()
                (spark.read.format("tidelog").option("servers", node.url).option("topic", topic)
                 .load().write.format("noop").mode("overwrite").save())
                t_read = time.perf_counter() - t0
                label = "warm-up" if run == 0 else f"run {run}"
                print(f"{label}: write {args.records / t_write:,.0f} rec/s, "
                      f"read {args.records / t_read:,.0f} rec/s")
                if run:
                    writes.append(args.records / t_write)
                    reads.append(args.records / t_read)
            print(f"median over {args.runs} runs of {args.records} records, "
                  f"{args.partitions} partitions: write {statistics.median(writes):,.0f} rec/s, "
                  f"read {statistics.median(reads):,.0f} rec/s")
        finally:
            spark.stop()
            node.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
