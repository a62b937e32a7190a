"""Leader-epoch cache: assignment on append, KIP-101 end offsets, truncation, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_testlib import records, small_config

from app.storage import PartitionLog
from app.storage.batch import encode_batch
from app.storage.epoch_cache import LeaderEpochCache


def epoch_log(tmp_path: Path) -> PartitionLog:
    """Epoch 1 at 0..9, epoch 3 at 10..19, epoch 4 at 20..24 (in 5-record batches)."""
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=400))
    for epoch, count in ((1, 10), (3, 10), (4, 5)):
        for _ in range(count // 5):
            log.append_records(records(log.log_end_offset, 5, 1), epoch, 1)
    return log


def test_epochs_are_assigned_by_the_first_batch_of_each(tmp_path: Path) -> None:
    log = epoch_log(tmp_path)
    assert log.epochs.entries == [(1, 0), (3, 10), (4, 20)]
    assert log.epochs.latest_epoch == 4


def test_end_offset_for_epoch_follows_kip_101(tmp_path: Path) -> None:
    log = epoch_log(tmp_path)
    leo = log.log_end_offset
    assert log.end_offset_for_epoch(0) == (-1, -1)  # older than everything we hold
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert log.end_offset_for_epoch(1) == (1, 10)
    assert log.end_offset_for_epoch(2) == (1, 10)  # never led here: the epoch below it
    assert log.end_offset_for_epoch(3) == (3, 20)
    assert log.end_offset_for_epoch(4) == (4, leo)
    assert log.end_offset_for_epoch(9) == (4, leo)  # new leader before its first batch


def test_truncation_trims_epochs_from_the_end(tmp_path: Path) -> None:
    log = epoch_log(tmp_path)
    log.truncate_to(20)
    assert log.epochs.entries == [(1, 0), (3, 10)]
    log.truncate_to(12)  # inside a batch of epoch 3 that starts at 10: whole batch goes
    assert log.log_end_offset == 10
    assert log.epochs.entries == [(1, 0)]
    log.append_records(records(10, 1, 1), 5, 1)
    assert log.epochs.entries == [(1, 0), (5, 10)]
    assert log.end_offset_for_epoch(4) == (1, 10)


def test_retention_trims_epochs_from_the_start(tmp_path: Path) -> None:
    log = epoch_log(tmp_path)
    log.close()
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=400, retention_bytes=0))
    bases = [s.base_offset for s in log.segments]
    assert log.enforce_retention(0, log.log_end_offset) == len(bases) - 1
    start = log.log_start_offset
    assert log.epochs.entries[0][1] == start
    assert all(o >= start for _e, o in log.epochs.entries)
    assert log.end_offset_for_epoch(log.epochs.entries[0][0])[1] > start


def test_epoch_cache_survives_reopen_and_stale_leader_is_refused(tmp_path: Path) -> None:
    log = epoch_log(tmp_path)
    log.close()
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=400))
    assert log.epochs.entries == [(1, 0), (3, 10), (4, 20)]
    with pytest.raises(ValueError):
        log.append_records(records(25, 1, 1), 3, 1)
    with pytest.raises(ValueError):
        log.append_batches(encode_batch(25, 2, records(25, 1, 1)), 1)
    assert log.log_end_offset == 25


def test_cache_file_roundtrip_and_unit_semantics(tmp_path: Path) -> None:
    path = tmp_path / "cache"
    c = LeaderEpochCache(path)
    assert not c.loaded_ok and c.entries == []
    c.assign(-1, 0)  # "no epoch" is never recorded
    assert c.entries == []
    c.assign(2, 5)
    c.assign(2, 9)  # same epoch: no-op
    c.assign(1, 9)  # older: no-op
    c.assign(6, 30)
    with pytest.raises(ValueError):
        c.assign(7, 10)  # starts before epoch 6: the log must have been truncated first
    assert LeaderEpochCache(path).entries == [(2, 5), (6, 30)]
    c.truncate_from_start(7)
    assert c.entries == [(2, 7), (6, 30)]
    c.truncate_from_start(30)
    assert c.entries == [(6, 30)]
    c.truncate_from_end(30)
    assert c.entries == []
    assert LeaderEpochCache(path).entries == []
    assert not list(tmp_path.glob("*.tmp"))
