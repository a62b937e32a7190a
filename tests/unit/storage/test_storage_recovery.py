"""Recovery on open: torn tails, CRC failures, lost or corrupt index and epoch files.

Damage is done with plain file I/O on the real files the log wrote.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from storage_testlib import BIG, batch_layout, read_all, records, seg_files, small_config

from app.storage import LogConfig, PartitionLog
from app.storage.batch import CRC_START, HEADER_SIZE, encode_batch


def build(directory: Path, cfg: LogConfig, batches: int = 60, seed: int = 0) -> list[tuple]:
    """A closed log; returns every record as read back."""
    log = PartitionLog(directory, cfg)
    rnd = random.Random(seed)
    for i in range(batches):
        n = rnd.randint(1, 5)
        stamps = [rnd.randint(0, 10_000) for _ in range(n)]
        log.append_records(records(log.log_end_offset, n, stamps, pad=rnd.randint(0, 60)),
                           i // 20, 0)
    everything = read_all(log)
    log.close()
    return everything


def check_every_offset(log: PartitionLog, want: list[tuple]) -> None:
    """Reads from every offset and timestamp lookups agree with ``want``."""
    assert read_all(log) == want
    for i, (off, *_rest) in enumerate(want):
        assert read_all(log, off) == want[i:]
        assert read_all(log, off, max_bytes=1)[0][0] == off
    for target in range(-1, 10_002, 97):
        expect = next((o for o, ts, _e, _b in want if ts >= target), None)
        assert log.offset_for_timestamp(target) == expect


def last_batch_pos(path: Path) -> int:
    heads = batch_layout(path.read_bytes())
    return sum(h.size for h in heads[:-1])


CFG = small_config(segment_bytes=1500, index_interval_bytes=128)


def test_clean_reopen_keeps_everything(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG)
    log = PartitionLog(tmp_path / "p", CFG)
    assert log.recovery.bytes_truncated == 0 and log.recovery.segments_deleted == 0
    assert log.recovery_point == log.log_end_offset == want[-1][0] + 1
    check_every_offset(log, want)


@pytest.mark.parametrize("tail_len", [1, HEADER_SIZE - 1, HEADER_SIZE, HEADER_SIZE + 20])
def test_torn_tail_is_truncated_and_appends_continue(tmp_path: Path, tail_len: int) -> None:
    want = build(tmp_path / "p", CFG)
    active = seg_files(tmp_path / "p", ".log")[-1]
    partial = encode_batch(want[-1][0] + 1, 2, records(0, 30, 5))[:tail_len]
    size = active.stat().st_size
    with open(active, "ab") as f:  # a crash mid-write of the next batch
        f.write(partial)
    log = PartitionLog(tmp_path / "p", CFG)
    assert log.recovery.bytes_truncated == tail_len
    assert active.stat().st_size == size
    check_every_offset(log, want)
    leo = log.log_end_offset
    assert log.append_records(records(leo, 2, 1), 2, 0) == (leo, leo + 1)
    assert [o for o, *_ in read_all(log)] == list(range(leo + 2))


def test_zero_filled_tail_is_truncated(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG)
    active = seg_files(tmp_path / "p", ".log")[-1]
    with open(active, "ab") as f:
        f.write(bytes(4096))
    log = PartitionLog(tmp_path / "p", CFG)
    assert log.recovery.bytes_truncated == 4096
    check_every_offset(log, want)


def test_flipped_crc_byte_in_the_last_batch_drops_that_batch(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG)
    active = seg_files(tmp_path / "p", ".log")[-1]
    raw = bytearray(active.read_bytes())
    pos = last_batch_pos(active)
    lost = len(batch_layout(bytes(raw[pos:]))) and batch_layout(bytes(raw[pos:]))[0]
    raw[pos + CRC_START - 2] ^= 0x01  # a byte of the stored CRC itself
    active.write_bytes(bytes(raw))
    log = PartitionLog(tmp_path / "p", CFG)
    assert log.recovery.bytes_truncated == len(raw) - pos
    assert log.log_end_offset == lost.base_offset
    check_every_offset(log, [r for r in want if r[0] < lost.base_offset])


def test_flipped_record_byte_in_the_middle_truncates_there(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=10**6, index_interval_bytes=128)
    want = build(tmp_path / "p", cfg)
    active = seg_files(tmp_path / "p", ".log")[-1]
    raw = bytearray(active.read_bytes())
    heads = batch_layout(bytes(raw))
    k = len(heads) // 2
    pos = sum(h.size for h in heads[:k])
    raw[pos + HEADER_SIZE + 25] ^= 0x20  # inside the first record's body
    active.write_bytes(bytes(raw))
    log = PartitionLog(tmp_path / "p", cfg)
    assert log.recovery.bytes_truncated == len(raw) - pos
    assert log.log_end_offset == heads[k].base_offset
    check_every_offset(log, [r for r in want if r[0] < heads[k].base_offset])


def test_corrupt_sealed_segment_after_recovery_point_drops_later_segments(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG, batches=80)
    logs = seg_files(tmp_path / "p", ".log")
    assert len(logs) >= 4
    victim = logs[1]
    raw = bytearray(victim.read_bytes())
    heads = batch_layout(bytes(raw))
    raw[heads[0].size + HEADER_SIZE + 3] ^= 0xFF  # second batch of the second segment
    victim.write_bytes(bytes(raw))
    log = PartitionLog(tmp_path / "p", CFG, recovery_point=0)  # unclean: verify everything
    cut_at = heads[1].base_offset
    assert log.log_end_offset == cut_at
    assert log.recovery.segments_deleted == len(logs) - 2
    assert len(seg_files(tmp_path / "p", ".log")) == 2
    assert len(seg_files(tmp_path / "p", ".index")) <= 2
    check_every_offset(log, [r for r in want if r[0] < cut_at])
    # The epoch cache no longer names epochs that only lived in the dropped segments.
    assert all(start < cut_at for _e, start in log.epochs.entries)
    assert log.recovery_point == cut_at


def test_recovery_point_limits_which_sealed_segments_are_verified(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG, batches=80)
    logs = seg_files(tmp_path / "p", ".log")
    raw = bytearray(logs[0].read_bytes())
    raw[HEADER_SIZE + 10] ^= 0x01  # below the recovery point: trusted, not scanned
    logs[0].write_bytes(bytes(raw))
    base2 = int(logs[2].stem)
    log = PartitionLog(tmp_path / "p", CFG, recovery_point=base2 + 1)
    assert log.recovery.segments_scanned == len(logs) - 2
    assert log.recovery.bytes_truncated == 0
    assert log.log_end_offset == want[-1][0] + 1


def test_gap_between_segments_drops_the_rest(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG, batches=80)
    logs = seg_files(tmp_path / "p", ".log")
    logs[2].unlink()  # lost file: segment 3 no longer continues segment 1
    log = PartitionLog(tmp_path / "p", CFG)
    assert log.log_end_offset == int(logs[2].stem)
    assert log.recovery.segments_deleted == len(logs) - 3
    check_every_offset(log, [r for r in want if r[0] < int(logs[2].stem)])


CORRUPTIONS = {
    "offset index missing": lambda p: p.with_suffix(".index").unlink(),
    "time index missing": lambda p: p.with_suffix(".timeindex").unlink(),
    "both missing": lambda p: [p.with_suffix(s).unlink() for s in (".index", ".timeindex")],
    "offset index torn": lambda p: _chop(p.with_suffix(".index"), 3),
    "time index torn": lambda p: _chop(p.with_suffix(".timeindex"), 5),
    "offset index zeroed": lambda p: _zero(p.with_suffix(".index")),
    "time index garbage": lambda p: _garbage(p.with_suffix(".timeindex")),
    "offset index garbage": lambda p: _garbage(p.with_suffix(".index")),
    "offset index empty": lambda p: p.with_suffix(".index").write_bytes(b""),
    "position off by a few bytes": lambda p: _bump_position(p.with_suffix(".index")),
}


def _chop(p: Path, n: int) -> None:
    p.write_bytes(p.read_bytes()[:-n])


def _zero(p: Path) -> None:
    p.write_bytes(bytes(p.stat().st_size))


def _garbage(p: Path) -> None:
    p.write_bytes(random.Random(7).randbytes(p.stat().st_size))


def _bump_position(p: Path) -> None:
    """Move one middle entry's position a little: still sorted, so only the log can tell."""
    raw = bytearray(p.read_bytes())
    i = (len(raw) // 8) // 2
    pos = int.from_bytes(raw[i * 8 + 4 : i * 8 + 8], "big")
    raw[i * 8 + 4 : i * 8 + 8] = (pos + 3).to_bytes(4, "big")
    p.write_bytes(bytes(raw))


@pytest.mark.parametrize("damage", sorted(CORRUPTIONS))
def test_index_damage_is_rebuilt_or_harmless(tmp_path: Path, damage: str) -> None:
    cfg = small_config(segment_bytes=3000, index_interval_bytes=64)
    want = build(tmp_path / "p", cfg, batches=80)
    logs = seg_files(tmp_path / "p", ".log")
    assert len(logs) >= 3
    for p in logs[:-1]:  # sealed segments: their index files are trusted on open
        CORRUPTIONS[damage](p)
    log = PartitionLog(tmp_path / "p", cfg)
    assert log.recovery.bytes_truncated == 0
    check_every_offset(log, want)
    log.close()
    # Rebuilt indexes were saved: they load cleanly next time.
    again = PartitionLog(tmp_path / "p", cfg)
    for seg in again.segments[:-1]:
        assert seg.index.offset_path.exists() and seg.index.time_path.exists()
    check_every_offset(again, want)


def test_stray_and_orphan_files_are_ignored_or_removed(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG)
    d = tmp_path / "p"
    (d / "README.log").write_text("not a segment")
    (d / f"{99_999:020d}.index").write_bytes(b"\0" * 8)
    (d / f"{99_999:020d}.timeindex").write_bytes(b"\0" * 12)
    (d / f"{0:020d}.index.tmp").write_bytes(b"partial")
    log = PartitionLog(d, CFG)
    assert not (d / f"{99_999:020d}.index").exists()
    assert not (d / f"{0:020d}.index.tmp").exists()
    assert (d / "README.log").exists()
    check_every_offset(log, want)


def test_epoch_cache_rebuilt_when_lost_or_corrupt(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG, batches=60)  # epochs 0, 1, 2 every 20 batches
    log = PartitionLog(tmp_path / "p", CFG)
    entries = list(log.epochs.entries)
    assert [e for e, _ in entries] == [0, 1, 2]
    log.close()
    cache = tmp_path / "p" / "leader-epoch-checkpoint"
    for damage in (b"", b"0\n3\n0 0\n1", b"garbage\xff", b"0\n2\n5 0\n1 9\n", None):
        if damage is None:
            cache.unlink()
        else:
            cache.write_bytes(damage)
        log = PartitionLog(tmp_path / "p", CFG)
        assert log.epochs.entries == entries
        assert read_all(log) == want
        log.close()
    # Behind the log (an old copy): rebuilt too.
    cache.write_text("0\n1\n0 0\n")
    log = PartitionLog(tmp_path / "p", CFG)
    assert log.epochs.entries == entries
    log.close()
    # Ahead of the log (the batches that started epoch 7 were lost): trimmed.
    leo = want[-1][0] + 1
    body = "".join(f"{e} {o}\n" for e, o in [*entries, (7, leo)])
    cache.write_text(f"0\n{len(entries) + 1}\n{body}")
    log = PartitionLog(tmp_path / "p", CFG)
    assert log.epochs.entries == entries


def test_recovery_point_given_past_the_log_end_still_recovers(tmp_path: Path) -> None:
    want = build(tmp_path / "p", CFG)
    log = PartitionLog(tmp_path / "p", CFG, recovery_point=10**9)
    check_every_offset(log, want)
    assert log.read(0, BIG) != b""


def test_index_entry_pointing_at_the_wrong_batch_falls_back_to_a_scan(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=10**6, index_interval_bytes=0)
    want = build(tmp_path / "p", cfg, batches=200)
    log = PartitionLog(tmp_path / "p", cfg)
    idx = log.segments[0].index
    assert len(idx) > 100  # more entries than the open-time spot check looks at
    for i in range(1, len(idx), 7):  # still sorted, but not batch starts any more
        idx.positions[i] = idx.positions[i] + 1
    check_every_offset(log, want)
