"""The sampler on real partition replicas (real logs in tmp_path), the event merge, the cache."""

from __future__ import annotations

import asyncio
from pathlib import Path

from app.dashboard.cache import TtlCache
from app.dashboard.history import HistorySampler
from app.dashboard.snapshot import merge_events
from app.partition import PartitionReplica
from app.records import ProducedRecord
from app.storage import LogConfig, PartitionLog
from replication.controller.image import PartitionMeta, TopicConfig


def _replica(tmp: Path, leader: int, partition: int = 0, epoch: int = 1) -> PartitionReplica:
    meta = PartitionMeta("t", partition, (1, 2), (1, 2), leader, epoch, epoch)
    log = PartitionLog(tmp / f"p{partition}", LogConfig())
    r = PartitionReplica("t", "id", meta, TopicConfig(min_insync_replicas=1), log, 1, 0)
    r.update_meta(meta, 0)
    return r


def _append(r: PartitionReplica, n: int) -> None:
    r.append([ProducedRecord(None, b'{"value":%d}' % i, 1000 + i, None) for i in range(n)])


def test_idle_partitions_have_no_ring_and_a_flat_history(tmp_path: Path) -> None:
    r = _replica(tmp_path, leader=1)
    s = HistorySampler({("t", 0): r}, capacity=10)
    for i in range(3):
        s.sample(1000 * i)
    assert s.stats()["rings"] == 0
    h = s.history(("t", 0))
    assert h is not None and h["log_end_offset"] == [0, 0, 0] and h["time_ms"] == [0, 1000, 2000]
    assert s.rate(("t", 0)) == 0.0


def test_appends_allocate_a_ring_and_show_as_records_per_second(tmp_path: Path) -> None:
    r = _replica(tmp_path, leader=1)
    s = HistorySampler({("t", 0): r}, capacity=4)
    s.sample(0)
    _append(r, 10)
    s.sample(1000)
    _append(r, 30)
    s.sample(2000)
    h = s.history(("t", 0))
    assert h is not None and s.stats()["rings"] == 1
    assert h["log_end_offset"] == [0, 10, 40]
    # The follower (broker 2) has fetched nothing: it lags the whole log.
    assert h["max_lag"] == [0, 10, 40]
    assert h["records_per_s"] == [0.0, 10.0, 30.0]
    assert s.rate(("t", 0), window=2) == 20.0
    for i in range(3, 7):  # wraps the 4-sample ring
        _append(r, 1)
        s.sample(1000 * i)
    h = s.history(("t", 0))
    assert h is not None and h["time_ms"] == [3000, 4000, 5000, 6000]
    assert h["log_end_offset"] == [41, 42, 43, 44]


def test_only_led_partitions_are_sampled_and_a_deposed_leader_drops_its_history(tmp_path: Path) -> None:
    led, followed = _replica(tmp_path, leader=1, partition=0), _replica(tmp_path, leader=2, partition=1)
    parts = {("t", 0): led, ("t", 1): followed}
    s = HistorySampler(parts, capacity=8)
    s.sample(0)
    assert s.history(("t", 1)) is None and s.rate(("t", 1)) is None
    assert s.history(("t", 0)) is not None
    led.update_meta(PartitionMeta("t", 0, (1, 2), (1, 2), 2, 2, 2), 1000)
    s.sample(1000)
    assert s.history(("t", 0)) is None
    del parts[("t", 1)]
    s.sample(2000)
    assert s.stats()["partitions"] == 0


def test_merge_keeps_one_row_per_cluster_event_with_the_proposers_reason() -> None:
    shrink = {"kind": "isr_shrink", "leader_epoch": 3, "detail": {"partition_epoch": 7, "new_isr": [1, 3]}}
    raw = [
        (2, {**shrink, "ts_ms": 105, "reason": "seen as a follower"}),
        (1, {**shrink, "ts_ms": 100, "reason": "replica 2 lags 5 records",
             "detail": {**shrink["detail"], "proposed_by": 1}}),
        (3, {"kind": "truncation", "leader_epoch": 3, "ts_ms": 90, "reason": "diverged", "detail": {}}),
        (2, {"kind": "truncation", "leader_epoch": 3, "ts_ms": 90, "reason": "diverged", "detail": {}}),
    ]
    out = merge_events(raw)
    assert [e["kind"] for e in out] == ["isr_shrink", "truncation", "truncation"]
    assert out[0]["reason"] == "replica 2 lags 5 records" and out[0]["brokers"] == [1, 2]
    assert out[0]["ts_ms"] == 100


async def test_cache_shares_one_fetch_between_concurrent_readers() -> None:
    calls = 0
    gate = asyncio.Event()

    async def fetch() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return calls

    cache: TtlCache[int] = TtlCache(ttl_s=60)
    readers = [asyncio.create_task(cache.get("k", fetch)) for _ in range(5)]
    await asyncio.sleep(0)
    readers[0].cancel()  # a reader going away does not cancel the fetch for the others
    gate.set()
    assert [await r for r in readers[1:]] == [1, 1, 1, 1]
    assert await cache.get("k", fetch) == 1 and calls == 1
