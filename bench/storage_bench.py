"""Micro-benchmark of the storage engine alone (no HTTP): append and read+decode.

    python bench/storage_bench.py [--batches 500] [--repeats 5]

Appends batches of 1,000 records with ~100-byte JSON bodies through
``PartitionLog.append_records`` (encode + write, default 128 MiB segments,
no fsync), then reads the whole log back in 1 MiB ``read`` calls and
decodes every record with ``iter_records``. Prints the median of each over
the repeats, each repeat in a fresh temporary directory.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from app.storage import LogConfig, PartitionLog, iter_records

RECORDS_PER_BATCH = 1_000
Batch = list[tuple[bytes | None, bytes, int]]


def make_batch(i: int) -> Batch:
    out: Batch = []
    for j in range(RECORDS_PER_BATCH):
        n = i * RECORDS_PER_BATCH + j
        body = b'{"key":"user-%06d","value":{"n":%d,"msg":"%s"},"headers":{}}' % (
            n % 100_000, n, b"x" * 40,
        )
        out.append((b"user-%06d" % (n % 100_000), body, 1_700_000_000_000 + n))
    return out


def run_once(directory: Path, batches: list[Batch]) -> tuple[float, float]:
    log = PartitionLog(directory, LogConfig())
    t0 = time.perf_counter()
    for recs in batches:
        log.append_records(recs, 0, 1_700_000_000_000)
    append_s = time.perf_counter() - t0
    total = len(batches) * RECORDS_PER_BATCH
    t0 = time.perf_counter()
    seen = 0
    offset = 0
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, 1 << 20)
        for off, _ts, _epoch, _body in iter_records(data):
            if off >= offset:
                seen += 1
                offset = off + 1
    read_s = time.perf_counter() - t0
    assert seen == total, (seen, total)
    log.close()
    return total / append_s, total / read_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    batches = [make_batch(i) for i in range(args.batches)]
    body_bytes = statistics.mean(len(b) for _k, b, _t in batches[0])
    appends, reads = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory(prefix="tidelog-bench-") as tmp:
            a, r = run_once(Path(tmp) / "bench-0", batches)
        appends.append(a)
        reads.append(r)
    print(f"records: {args.batches} batches x {RECORDS_PER_BATCH}, body ~{body_bytes:.0f} B, "
          f"{args.repeats} repeats")
    print(f"append         median {statistics.median(appends):>12,.0f} records/s")
    print(f"read+decode    median {statistics.median(reads):>12,.0f} records/s")


if __name__ == "__main__":
    main()
