"""Streaming pipeline on tidelog: JSON events in, running totals per key out.

Reads the ``events`` topic (records like ``{"user": "ana", "amount": 12.5}``
keyed by user), keeps a running count and sum per key in a Spark streaming
aggregation, and writes every changed total to the ``user-totals`` topic
(key = user, value = ``{"user", "events", "amount"}``). Output mode
``complete`` (Spark's Python data source sinks support append and complete,
not update): each micro-batch that saw input re-emits every key's total, so
the latest record per key in ``user-totals`` is the current total. Restarting
with the same ``--checkpoint`` resumes where the last run stopped; the sink
is at-least-once, so a crash between produce and checkpoint can re-emit a
total (harmless here: it is the same value again).

Run it as shown in ``app/spark/README.md``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys

import httpx


def produce_demo_events(servers: str, topic: str, n: int, seed: int) -> None:
    """Create the topics if needed and append ``n`` random events (for trying the example)."""
    base = servers.split(",")[0].rstrip("/")
    rng = random.Random(seed)
    users = ["ana", "bo", "chen", "dee", "eli"]
    with httpx.Client(base_url=base, timeout=30) as http:
        http.post("/v1/topics", json={"name": topic, "partitions": 2}).raise_for_status()
        for start in range(0, n, 500):
            events = []
            for _ in range(min(500, n - start)):
                user = rng.choice(users)
                events.append({"key": user, "value": {"user": user,
                                                      "amount": round(rng.uniform(1, 100), 2)}})
            http.post(f"/v1/topics/{topic}/records", json={"records": events}).raise_for_status()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="http://127.0.0.1:8080",
                    help="comma-separated tidelog node URLs")
    ap.add_argument("--source", default="events")
    ap.add_argument("--sink", default="user-totals")
    ap.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    ap.add_argument("--available-now", action="store_true",
                    help="process what is there now and exit (default: run until Ctrl-C)")
    ap.add_argument("--trigger-seconds", type=float, default=5.0)
    ap.add_argument("--demo-events", type=int, default=0,
                    help="first produce this many random events to --source")
    args = ap.parse_args(argv)

    if args.demo_events:
        produce_demo_events(args.servers, args.source, args.demo_events, seed=7)
    with httpx.Client(timeout=30) as http:
        http.post(f"{args.servers.split(',')[0].rstrip('/')}/v1/topics",
                  json={"name": args.sink, "partitions": 1}).raise_for_status()

    # Spark's Python workers must run this interpreter (it has tidelog and pyarrow).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from app.spark import register

    spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
             .appName("tidelog-pipeline")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    register(spark)

    events = (spark.readStream.format("tidelog")
              .option("servers", args.servers)
              .option("topic", args.source)
              .option("startingOffsets", "earliest")
              .option("maxRecordsPerTrigger", 10_000)
              .load())
    parsed = events.select(
        F.col("key"),
        F.from_json("value", "user string, amount double").alias("e"),
    )
    totals = (parsed.groupBy(F.coalesce("key", "e.user").alias("user"))
              .agg(F.count(F.lit(1)).alias("events"), F.round(F.sum("e.amount"), 2).alias("amount")))
    out = totals.select(
        F.col("user").alias("key"),
        F.to_json(F.struct("user", "events", "amount")).alias("value"),
    )
    writer = (out.writeStream.format("tidelog")
              .outputMode("complete")
              .option("servers", args.servers)
              .option("topic", args.sink)
              .option("checkpointLocation", args.checkpoint))
    if args.available_now:
        query = writer.trigger(availableNow=True).start()
    else:
        query = writer.trigger(processingTime=f"{args.trigger_seconds} seconds").start()
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    progress = query.lastProgress
    if progress:
        print(f"last batch {progress['batchId']}: {progress['numInputRows']} input rows")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
