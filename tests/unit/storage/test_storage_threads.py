"""Reads and flushes in worker threads while this thread appends, rolls, truncates and retains."""

from __future__ import annotations

import threading
from pathlib import Path

from storage_testlib import records, small_config, unrender

from app.storage import OffsetOutOfRange, PartitionLog, iter_records


def test_reader_and_flusher_threads_never_see_torn_or_wrong_data(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "p", small_config(segment_bytes=2000, retention_bytes=6000,
                                                    index_interval_bytes=100))
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def reader() -> None:
        try:
            while not stop.is_set():
                start, end = log.log_start_offset, log.log_end_offset
                for off in (start, (start + end) // 2, max(start, end - 1)):
                    try:
                        data = log.read(off, 3000)
                    except OffsetOutOfRange:
                        continue  # retention or truncation moved the range meanwhile
                    offs = [o for o, ts, e, served in iter_records(data)
                            if unrender(o, ts, e, served) == b'{"value":%d,"pad":""}' % o]
                    got = [o for o, *_ in iter_records(data)]
                    assert offs == got, "a record body does not match its offset"
                    assert got == list(range(got[0], got[0] + len(got))) if got else True
                    reads[0] += 1
                log.offset_for_timestamp(5)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def flusher() -> None:
        try:
            while not stop.is_set():
                rp = log.flush()
                assert rp >= 0
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    threads.append(threading.Thread(target=flusher))
    for t in threads:
        t.start()
    try:
        for i in range(1_500):
            log.append_records(records(log.log_end_offset, 1 + i % 5, i), 0, i)
            if i % 97 == 0:
                log.truncate_to(log.log_end_offset - 3)
            if i % 41 == 0:
                log.enforce_retention(i, log.log_end_offset)
            if errors:
                break
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not errors, errors
    assert reads[0] > 0
    assert log.recovery_point <= log.log_end_offset
    # Bodies are written so that body == f(offset); the final log is contiguous.
    all_offsets = [o for o, *_ in iter_records(log.read(log.log_start_offset, 1 << 30))]
    assert all_offsets == list(range(log.log_start_offset, log.log_end_offset))
