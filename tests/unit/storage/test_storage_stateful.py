"""Hypothesis state machine: PartitionLog against a list of batches in memory.

Rules append (as leader and as follower), read, look up timestamps, truncate,
enforce retention, flush, and close+reopen (cleanly, after a torn tail, after
a flipped byte in the last batch). After every step the log's bounds, its
records (offset, timestamp, epoch, body), its epoch cache and its recovery
point must match the model. Derandomized, bounded: runs in seconds in CI.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from storage_testlib import BIG, batch_layout, decoded

from app.storage import PartitionLog
from app.storage.batch import CRC_START, encode_batch

CFG_KW = {"segment_bytes": 700, "segment_ms": 400, "index_interval_bytes": 96}


@dataclass
class MBatch:
    base: int
    epoch: int
    recs: list[tuple[int, bytes]]  # (timestamp, body)

    @property
    def next(self) -> int:
        return self.base + len(self.recs)


record_st = st.tuples(st.integers(0, 1_000), st.binary(min_size=0, max_size=40))
batch_st = st.lists(record_st, min_size=1, max_size=6)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="tidelog-storage-"))
        self.dir = self.tmp / "t-0"
        from app.storage import LogConfig

        self.cfg = LogConfig(**CFG_KW)
        self.log = PartitionLog(self.dir, self.cfg)
        self.batches: list[MBatch] = []
        self.start = 0
        self.epoch = 0
        self.now = 1_000_000

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- model helpers -------------------------------------------------------------------
    @property
    def leo(self) -> int:
        return self.batches[-1].next if self.batches else self.start

    def model_records(self, offset: int) -> list[tuple[int, int, int, bytes]]:
        out = []
        for b in self.batches:
            for i, (ts, body) in enumerate(b.recs):
                if b.base + i >= offset:
                    out.append((b.base + i, ts, b.epoch, body))
        return out

    def model_epochs(self) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for b in self.batches:
            if not out or b.epoch > out[-1][0]:
                out.append((b.epoch, b.base))
        return out

    @staticmethod
    def encode(recs: list[tuple[int, bytes]]) -> list[tuple[bytes | None, bytes, int]]:
        return [(None, b'{"b":"%s"}' % body.hex().encode(), ts) for ts, body in recs]

    def stored(self, recs: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        return [(ts, body) for (_k, body, ts) in self.encode(recs)]

    # ---- rules ---------------------------------------------------------------------------
    @initialize()
    def start_clean(self) -> None:
        pass

    @rule(recs=batch_st, dt=st.integers(0, 150), bump=st.booleans())
    def append_as_leader(self, recs: list[tuple[int, bytes]], dt: int, bump: bool) -> None:
        self.now += dt
        self.epoch += bump
        base, last = self.log.append_records(self.encode(recs), self.epoch, self.now)
        assert (base, last) == (self.leo, self.leo + len(recs) - 1)
        self.batches.append(MBatch(base, self.epoch, self.stored(recs)))

    @rule(batches=st.lists(batch_st, min_size=1, max_size=4), dt=st.integers(0, 150))
    def append_as_follower(self, batches: list[list[tuple[int, bytes]]], dt: int) -> None:
        self.now += dt
        data = b""
        base = self.leo
        new = []
        for recs in batches:
            data += encode_batch(base, self.epoch, self.encode(recs))
            new.append(MBatch(base, self.epoch, self.stored(recs)))
            base += len(recs)
        assert self.log.append_batches(data, self.now) == base
        self.batches.extend(new)

    @rule(data=st.data(), max_bytes=st.integers(0, 3_000), upto_delta=st.integers(-3, 3))
    def read(self, data: st.DataObject, max_bytes: int, upto_delta: int) -> None:
        offset = data.draw(st.integers(self.start, self.leo))
        upto = None if upto_delta == 3 else self.leo + upto_delta
        raw = self.log.read(offset, max_bytes, upto)
        limit = self.leo if upto is None else min(upto, self.leo)
        heads = batch_layout(raw)
        if offset >= limit:
            assert raw == b""
            return
        assert heads, "at least one batch when a record is in range"
        first = next(b for b in self.batches if b.base <= offset < b.next)
        assert heads[0].base_offset == first.base
        assert all(h.base_offset < limit for h in heads)
        assert len(heads) == 1 or len(raw) <= max_bytes
        got = decoded(raw)
        assert got == self.model_records(first.base)[: len(got)]

    @rule(ts=st.integers(-1, 1_002))
    def lookup_timestamp(self, ts: int) -> None:
        want = next((o for o, t, _e, _b in self.model_records(self.start) if t >= ts), None)
        assert self.log.offset_for_timestamp(ts) == want

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(max(0, self.start - 2), self.leo + 2))
        self.log.truncate_to(offset)
        if offset >= self.leo:
            return
        if offset <= self.start:
            self.batches, self.start = [], offset
            return
        # Whole batches: the one holding ``offset`` goes too.
        self.batches = [b for b in self.batches if b.next <= offset]

    @rule(dt=st.integers(0, 3_000), hw_delta=st.integers(0, 20), by_size=st.booleans(),
          limit=st.integers(0, 3_000))
    def retention(self, dt: int, hw_delta: int, by_size: bool, limit: int) -> None:
        # Oracle over the segment list just before (the same rule as Kafka's).
        segs = [(s.base_offset, s.next_offset, s.size, s.max_timestamp) for s in self.log.segments]
        max_offset = max(self.start, self.leo - hw_delta)
        now = self.now + dt
        total = sum(s[2] for s in segs)
        keep_from = self.start
        for _base, nxt, size, max_ts in segs[:-1]:
            if nxt > max_offset:
                break
            old = not by_size and now - max_ts > limit
            big = by_size and total - size >= limit
            if not (old or big):
                break
            total -= size
            keep_from = nxt
        cfg = dict(CFG_KW, retention_bytes=limit if by_size else None,
                   retention_ms=None if by_size else limit)
        from app.storage import LogConfig

        self.log.config = LogConfig(**cfg)  # type: ignore[misc]
        self.log.enforce_retention(now, max_offset)
        self.log.config = self.cfg  # type: ignore[misc]
        assert self.log.log_start_offset == keep_from
        self.batches = [b for b in self.batches if b.base >= keep_from]
        self.start = keep_from

    @rule()
    def flush(self) -> None:
        assert self.log.flush() == self.leo

    @rule(use_checkpoint=st.booleans())
    def reopen_clean(self, use_checkpoint: bool) -> None:
        rp = self.log.recovery_point if use_checkpoint else None
        self.log.close()
        self.log = PartitionLog(self.dir, self.cfg, recovery_point=rp)
        assert self.log.recovery.bytes_truncated == 0

    @rule(cut=st.integers(1, 200), zeros=st.booleans())
    def reopen_after_torn_tail(self, cut: int, zeros: bool) -> None:
        self.log.close()
        active = max(self.dir.glob("*.log"))
        whole = encode_batch(self.leo, self.epoch, self.encode([(1, b"torn" * 30)]))
        tail = bytes(min(cut, 100)) if zeros else whole[: min(cut, len(whole) - 1)]
        with open(active, "ab") as f:
            f.write(tail)
        self.log = PartitionLog(self.dir, self.cfg, recovery_point=None)
        assert self.log.recovery.bytes_truncated == len(tail)

    @precondition(lambda self: self.batches and self.batches[-1].base >= self._active_base())
    @rule(where=st.integers(0, 10_000))
    def reopen_after_flipped_byte_in_last_batch(self, where: int) -> None:
        self.log.close()
        active = max(self.dir.glob("*.log"))
        raw = bytearray(active.read_bytes())
        pos = sum(h.size for h in batch_layout(bytes(raw))[:-1])
        k = pos + CRC_START - 4 + where % (len(raw) - pos - CRC_START + 4)
        raw[k] ^= 0x10  # the CRC itself or any byte it covers
        active.write_bytes(bytes(raw))
        self.log = PartitionLog(self.dir, self.cfg, recovery_point=None)
        lost = self.batches.pop()
        assert self.log.recovery.bytes_truncated == len(raw) - pos
        assert self.log.log_end_offset == lost.base

    def _active_base(self) -> int:
        return int(max(self.dir.glob("*.log")).stem)

    # ---- invariants ----------------------------------------------------------------------
    @invariant()
    def bounds_match(self) -> None:
        assert self.log.log_start_offset == self.start
        assert self.log.log_end_offset == self.leo
        assert self.log.recovery_point <= self.log.log_end_offset

    @invariant()
    def records_match(self) -> None:
        got = decoded(self.log.read(self.start, BIG))
        assert [g[0] for g in got] == list(range(self.start, self.leo))
        assert got == self.model_records(self.start)

    @invariant()
    def epochs_match(self) -> None:
        assert self.log.epochs.entries == self.model_epochs()
        assert self.log.latest_epoch == (self.batches[-1].epoch if self.batches else -1)


LogMachine.TestCase.settings = settings(
    max_examples=80,
    stateful_step_count=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestPartitionLogAgainstModel = LogMachine.TestCase
