"""The in-memory log answers the KIP-101 question like the storage layer does."""

from __future__ import annotations

from core_support import log_of

from replication.core.log import MemoryLog, ReplicaLog


def test_memory_log_satisfies_the_replica_log_protocol() -> None:
    log: ReplicaLog = MemoryLog()
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (0, 0, -1)


def test_end_offset_for_epoch_is_the_next_epochs_start_or_the_leo() -> None:
    log = log_of(0, 0, 2, 2, 5)
    assert log.end_offset_for_epoch(0) == (0, 2)
    assert log.end_offset_for_epoch(1) == (0, 2)  # largest epoch <= 1
    assert log.end_offset_for_epoch(2) == (2, 4)
    assert log.end_offset_for_epoch(5) == (5, 5)
    assert log.end_offset_for_epoch(9) == (5, 5)  # newer than every entry: the latest
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert MemoryLog().end_offset_for_epoch(3) == (-1, -1)


def test_truncation_forgets_epochs_that_start_at_or_after_the_new_end() -> None:
    log = log_of(0, 0, 2, 2, 5)
    log.truncate_to(2)
    assert (log.log_end_offset, log.latest_epoch) == (2, 0)
    assert log.end_offset_for_epoch(5) == (0, 2)


def test_power_loss_drops_only_what_was_not_flushed() -> None:
    log = log_of(0, 0)
    log.flush()
    log.append(1, 7)
    log.lose_unflushed()
    assert log.records == [0, 1] and log.latest_epoch == 0
