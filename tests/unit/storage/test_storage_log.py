"""PartitionLog append / read / roll / timestamp lookup / truncation / retention on real files."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from storage_testlib import BIG, batch_layout, body, dir_snapshot, read_all, records, small_config

from app.storage import CorruptBatchError, LogConfig, OffsetOutOfRange, PartitionLog, iter_records
from app.storage.batch import encode_batch


def fill(log: PartitionLog, batches: int, *, seed: int = 1, ts0: int = 1_000, epoch: int = 0,
         pad_max: int = 80) -> list[tuple[int, int]]:
    """Append batches of 1..7 records; returns ``[(base, last)]``."""
    rnd = random.Random(seed)
    out = []
    for i in range(batches):
        n = rnd.randint(1, 7)
        first = log.log_end_offset
        out.append(
            log.append_records(records(first, n, ts0 + i, pad=rnd.randint(0, pad_max)), epoch, ts0)
        )
    return out


@pytest.fixture
def log(tmp_path: Path) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", small_config())


def test_empty_log_reads_nothing_and_bounds_are_zero(log: PartitionLog) -> None:
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 0, 0)
    assert log.read(0, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 100)
    assert log.offset_for_timestamp(0) is None
    assert log.end_offset_for_epoch(0) == (-1, -1)


def test_append_assigns_contiguous_offsets_and_reads_back_bodies(log: PartitionLog) -> None:
    assert log.append_records(records(0, 3, 5), 0, 5) == (0, 2)
    assert log.append_records(records(3, 1, 6), 0, 6) == (3, 3)
    got = read_all(log)
    assert [o for o, *_ in got] == [0, 1, 2, 3]
    assert [b for *_, b in got] == [body(i) for i in range(4)]
    assert [ts for _o, ts, _e, _b in got] == [5, 5, 5, 6]
    with pytest.raises(ValueError):
        log.append_records([], 0, 7)


def test_read_at_every_offset_starts_with_the_batch_holding_it(log: PartitionLog) -> None:
    spans = fill(log, 120)
    leo = log.log_end_offset
    assert len(log.segments) > 3
    for base, last in spans:
        for off in range(base, last + 1):
            one = list(iter_records(log.read(off, 1)))  # max_bytes < any batch: exactly one batch
            assert [o for o, *_ in one] == list(range(base, last + 1))
            rest = read_all(log, off)
            assert [o for o, *_ in rest] == list(range(off, leo))
    assert log.read(leo, BIG) == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(leo + 1, BIG)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, BIG)


def test_upto_offset_never_returns_a_batch_starting_at_or_past_it(log: PartitionLog) -> None:
    spans = fill(log, 60, seed=2)
    leo = log.log_end_offset
    rnd = random.Random(3)
    for _ in range(400):
        off = rnd.randrange(0, leo + 1)
        upto = rnd.randrange(0, leo + 3)
        data = log.read(off, BIG, upto)
        heads = batch_layout(data)
        if off >= min(upto, leo):
            assert data == b""
            continue
        assert heads and all(h.base_offset < upto for h in heads)
        offs = [o for o, *_ in iter_records(data)]
        # Everything in [off, upto) is there, contiguous, and only whole batches.
        want = list(range(off, min(upto, leo)))
        assert [o for o in offs if off <= o < upto] == want
        assert offs == list(range(heads[0].base_offset, heads[-1].next_offset))
        assert any(b <= off <= last for b, last in spans[:] if b == heads[0].base_offset)


def test_max_bytes_caps_every_read_except_a_lone_first_batch(log: PartitionLog) -> None:
    fill(log, 80, seed=4)
    leo = log.log_end_offset
    for off in range(0, leo, 3):
        for max_bytes in (0, 1, 60, 200, 250, 333, 700, 1111, 2500, 5000, 9000):
            data = log.read(off, max_bytes)
            heads = batch_layout(data)
            assert heads, (off, max_bytes)
            offs = [o for o, *_ in iter_records(data)]
            assert offs == list(range(heads[0].base_offset, heads[-1].next_offset))
            if len(heads) > 1:
                assert len(data) <= max_bytes
            else:
                assert len(data) == heads[0].size
            # Reading on from where this read ended continues without a gap.
            nxt = heads[-1].next_offset
            if nxt < leo:
                assert batch_layout(log.read(nxt, max_bytes))[0].base_offset == nxt


def test_roll_by_size_keeps_segments_under_segment_bytes_and_contiguous(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=1500))
    fill(log, 100, seed=5)
    assert len(log.segments) > 5
    for prev, seg in zip(log.segments, log.segments[1:], strict=False):
        assert seg.base_offset == prev.next_offset
        assert prev.size <= 1500
    names = sorted(p.name for p in tmp_path.joinpath("p").glob("*.log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    # Sealed segments have saved indexes.
    for seg in log.segments[:-1]:
        assert seg.index.offset_path.exists() and seg.index.time_path.exists()


def test_a_batch_larger_than_segment_bytes_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=300))
    log.append_records(records(0, 1, 1), 0, 1)
    log.append_records(records(1, 20, 2), 0, 2)  # ~800 bytes
    log.append_records(records(21, 1, 3), 0, 3)
    assert [s.base_offset for s in log.segments] == [0, 1, 21]
    assert [o for o, *_ in read_all(log)] == list(range(22))


def test_roll_by_age_uses_the_wall_clock_not_old_record_timestamps(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_ms=1_000, segment_bytes=10**6))
    now = 50_000_000
    # Producers may send ancient timestamps; that must not roll every batch.
    for i in range(5):
        log.append_records(records(i, 1, 7), 0, now + i)
    assert len(log.segments) == 1
    log.append_records(records(5, 1, 7), 0, now + 999)
    assert len(log.segments) == 1
    log.append_records(records(6, 1, 7), 0, now + 1_000)
    assert [s.base_offset for s in log.segments] == [0, 6]
    log.append_records(records(7, 1, 7), 0, now + 1_500)
    assert len(log.segments) == 2
    log.append_records(records(8, 1, 7), 0, now + 2_000)
    assert [s.base_offset for s in log.segments] == [0, 6, 8]


def test_roll_by_age_after_reopen_rolls_at_most_once_for_old_timestamps(tmp_path: Path) -> None:
    cfg = small_config(segment_ms=1_000, segment_bytes=10**6)
    log = PartitionLog(tmp_path / "p", cfg)
    log.append_records(records(0, 1, 7), 0, 10**12)
    log.close()
    log = PartitionLog(tmp_path / "p", cfg)
    for i in range(1, 6):
        log.append_records(records(i, 1, 7), 0, 10**12 + i)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_follower_copy_is_byte_identical_and_rolls_by_size(tmp_path: Path) -> None:
    leader = PartitionLog(tmp_path / "leader", small_config(segment_bytes=10**6))
    fill(leader, 90, seed=6)
    follower = PartitionLog(tmp_path / "follower", small_config(segment_bytes=1200))
    off = 0
    while off < leader.log_end_offset:
        data = leader.read(off, 5000)
        off = follower.append_batches(data, 1_000)
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.read(0, BIG) == leader.read(0, BIG)
    assert len(follower.segments) > 5
    assert all(s.size <= 1200 for s in follower.segments[:-1])
    assert follower.append_batches(b"", 1) == leader.log_end_offset


def test_append_batches_refuses_bad_input_and_changes_nothing(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config())
    log.append_batches(encode_batch(0, 1, records(0, 3, 10)), 10)
    log.flush()
    good = encode_batch(3, 1, records(3, 2, 11))
    cases: list[bytes] = [
        encode_batch(4, 1, records(4, 2, 11)),  # gap
        encode_batch(2, 1, records(2, 2, 11)),  # overlap
        good + encode_batch(6, 1, records(6, 1, 11)),  # gap after a good batch
        good[:-1],  # torn
        good + good[:30],  # trailing partial header
    ]
    flipped = bytearray(good)
    flipped[-3] ^= 0x40
    cases.append(bytes(flipped))  # CRC mismatch
    cases.append(good + good)  # the same batch twice
    bad_crc = bytearray(encode_batch(5, 1, records(5, 1, 11)))
    bad_crc[-2] ^= 1
    cases.append(good + bytes(bad_crc))  # good first batch, corrupt second
    before = dir_snapshot(log.dir)
    for data in cases:
        with pytest.raises(CorruptBatchError):
            log.append_batches(data, 12)
        assert log.log_end_offset == 3
        assert dir_snapshot(log.dir) == before
    with pytest.raises(ValueError):  # epoch going backwards
        log.append_batches(encode_batch(3, 0, records(3, 1, 11)), 12)
    assert dir_snapshot(log.dir) == before
    assert log.append_batches(good, 12) == 5


def test_offset_for_timestamp_with_timestamps_out_of_order(tmp_path: Path) -> None:
    for interval in (0, 64, 4096):
        log = PartitionLog(tmp_path / f"p{interval}", small_config(index_interval_bytes=interval,
                                                                   segment_bytes=2000))
        rnd = random.Random(interval)
        model: list[int] = []
        for _ in range(150):
            n = rnd.randint(1, 6)
            stamps = [rnd.randint(0, 5_000) for _ in range(n)]
            log.append_records(records(len(model), n, stamps), 0, 0)
            model.extend(stamps)
        for reopened in (False, True):
            if reopened:
                log.close()
                log = PartitionLog(log.dir, log.config)
            for target in [*range(-2, 5_003, 37), 5_000, max(model), max(model) + 1]:
                want = next((o for o, ts in enumerate(model) if ts >= target), None)
                assert log.offset_for_timestamp(target) == want, (interval, target)


def test_truncate_inside_a_batch_removes_the_whole_batch(log: PartitionLog) -> None:
    log.append_records(records(0, 4, 1), 0, 1)
    log.append_records(records(4, 4, 2), 0, 2)
    log.truncate_to(6)
    assert log.log_end_offset == 4
    assert [o for o, *_ in read_all(log)] == [0, 1, 2, 3]
    log.truncate_to(4)  # at a batch boundary: no-op now
    assert log.log_end_offset == 4
    log.truncate_to(99)
    assert log.log_end_offset == 4
    assert log.append_records(records(4, 1, 3), 0, 3) == (4, 4)


def test_truncate_at_and_across_segment_boundaries(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=900))
    spans = fill(log, 60, seed=7)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    # Exactly at a segment boundary: the earlier segment stays whole.
    cut = bases[-2]
    log.truncate_to(cut)
    assert log.log_end_offset == cut and log.segments[-1].next_offset == cut
    assert [s.base_offset for s in log.segments] == bases[:-2]
    # Just past a segment base, inside its first batch.
    first_batch = next(s for s in spans if s[0] == bases[1])
    log.truncate_to(first_batch[1])
    assert log.log_end_offset == bases[1]
    assert [o for o, *_ in read_all(log)] == list(range(log.log_end_offset))
    assert all(not p.exists() for p in (tmp_path / "p").glob("*.tmp"))
    log.close()
    again = PartitionLog(tmp_path / "p", log.config, recovery_point=0)
    assert again.recovery.bytes_truncated == 0
    assert [o for o, *_ in read_all(again)] == list(range(log.log_end_offset))
    again.append_records(records(again.log_end_offset, 2, 1), 0, 1)
    assert [o for o, *_ in read_all(again)] == list(range(again.log_end_offset))


def test_truncate_at_or_below_log_start_restarts_the_log(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=600, retention_bytes=0)
    log = PartitionLog(tmp_path / "p", cfg)
    fill(log, 40, seed=8)
    log.enforce_retention(0, log.log_end_offset)
    start = log.log_start_offset
    assert start > 0
    gen = log.generation
    log.truncate_to(start)
    assert (log.log_start_offset, log.log_end_offset) == (start, start)
    assert log.generation > gen
    log.append_records(records(start, 2, 1), 3, 1)
    log.truncate_to(start - 5)  # below the log start: empty, restart there
    assert (log.log_start_offset, log.log_end_offset) == (start - 5, start - 5)
    assert log.epochs.entries == []
    assert log.recovery_point == start - 5
    with pytest.raises(ValueError):
        log.truncate_fully_and_start_at(-1)
    log.truncate_fully_and_start_at(1_000)
    assert log.append_records(records(1_000, 1, 1), 0, 1) == (1_000, 1_000)
    log.close()
    assert PartitionLog(tmp_path / "p", cfg).log_start_offset == 1_000


def test_retention_by_size_deletes_whole_sealed_segments_below_max_offset(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=800, retention_bytes=2000))
    fill(log, 60, seed=9, epoch=2)
    total = log.size_bytes
    segs = [(s.base_offset, s.next_offset, s.size) for s in log.segments]
    # Nothing above max_offset may go: with max_offset inside the 2nd segment only the 1st can.
    assert log.enforce_retention(0, segs[1][0] + 1) == 1
    assert log.log_start_offset == segs[1][0]
    n = log.enforce_retention(0, log.log_end_offset)
    assert n >= 1
    assert log.size_bytes < total
    assert log.size_bytes - log.segments[0].size < 2000 <= log.size_bytes or len(log.segments) == 1
    assert log.epochs.entries == [(2, log.log_start_offset)]
    with pytest.raises(OffsetOutOfRange):
        log.read(log.log_start_offset - 1, 10)
    assert [o for o, *_ in read_all(log)] == list(range(log.log_start_offset, log.log_end_offset))
    # The active segment never goes, even when it alone exceeds the limit.
    tiny = PartitionLog(tmp_path / "tiny", small_config(segment_bytes=800, retention_bytes=0))
    fill(tiny, 60, seed=9)
    tiny.enforce_retention(0, tiny.log_end_offset)
    assert len(tiny.segments) == 1 and tiny.size_bytes > 0
    assert tiny.log_start_offset == tiny.segments[0].base_offset > 0


def test_retention_by_time_uses_the_largest_timestamp_of_a_segment(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=10**6, retention_ms=100))
    log.append_records(records(0, 2, [10, 500]), 0, 0)
    log.roll()
    log.append_records(records(2, 2, [200, 20]), 0, 0)
    log.roll()
    log.append_records(records(4, 1, 1), 0, 0)
    # 600 - 500 is not > 100, and retention stops at the first segment it keeps
    # (the log start only moves forward over a prefix).
    assert log.enforce_retention(600, 10**9) == 0
    assert log.enforce_retention(601, 3) == 1  # the second segment is not below max_offset
    assert log.log_start_offset == 2
    assert log.enforce_retention(10**9, 10**9) == 1  # the active segment stays
    assert log.log_start_offset == 4
    assert [o for o, *_ in read_all(log)] == [4]


def test_no_retention_limits_delete_nothing(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", LogConfig(segment_bytes=500, retention_ms=-1,
                                                  retention_bytes=None, index_interval_bytes=0))
    fill(log, 30)
    assert log.enforce_retention(10**15, log.log_end_offset) == 0


def test_flush_and_recovery_point(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=700))
    fill(log, 20)
    assert log.recovery_point == 0
    assert log.flush() == log.log_end_offset == log.recovery_point
    log.truncate_to(5)
    assert log.recovery_point == log.log_end_offset <= 5
    fill(log, 20, seed=3)
    assert log.recovery_point <= 5  # appended, not flushed
    log.close()
    # Reopened after an unclean stop: everything from the checkpoint on is
    # verified and fsynced, so the recovery point starts at the log end.
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=700, retention_bytes=0),
                       recovery_point=3)
    assert log.recovery_point == log.log_end_offset
    log.truncate_to(log.log_end_offset - 1)
    assert log.recovery_point == log.log_end_offset
    log.enforce_retention(0, log.log_end_offset)
    assert log.log_start_offset <= log.recovery_point <= log.log_end_offset
    log.close()
    log.close()  # idempotent


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=700))
    fill(log, 20)
    log.delete()
    assert not (tmp_path / "p").exists()
