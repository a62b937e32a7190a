"""Durable storage: FINDINGS 1 (msgpack log unreadable, r04) and 12 (no fsync,
truncate-then-write term/vote file); the snapshot base of the log (FINDINGS 13)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgpack
import pytest
import raftos
from raftos import storage as raftos_storage
from raftos.serializers import MessagePackSerializer

from replication.controller.raft import storage
from replication.controller.raft.errors import StorageCorrupt
from replication.controller.raft.storage import CompactingLog, DirLock, DurableTermStore

AWKWARD = [10, 266, "a\nb", "k" * 10, {"nested": [1, None, "\x00"]}, "ünïcode ✓"]


def test_raftos_msgpack_log_cannot_be_read_back(tmp_path: Path) -> None:
    """r04: newline framing + readlines: a 0x0a byte inside msgpack splits an entry."""
    raftos.configure({"log_path": str(tmp_path)})
    log = raftos_storage.Log("127.0.0.1:1", serializer=MessagePackSerializer)
    failures = 0
    for value in AWKWARD:
        log.cache = []
        open(log.filename, "wb").close()
        with open(log.filename, "ab") as f:
            f.write(msgpack.packb({"term": 1, "command": {"k": value}}) + b"\n")
        try:
            if log.read() != [{"term": 1, "command": {"k": value}}]:
                failures += 1
        except Exception:
            failures += 1
    assert failures >= 4


def test_json_log_round_trips_awkward_values(tmp_path: Path) -> None:
    log = CompactingLog(tmp_path)
    for i, value in enumerate(AWKWARD, start=1):
        log.write(i, {"k": value})
    again = CompactingLog(tmp_path)
    assert [e["command"]["k"] for e in again.cache] == AWKWARD
    assert again.last_log_term == len(AWKWARD)


def test_torn_append_is_dropped_and_mid_log_garbage_refused(tmp_path: Path) -> None:
    log = CompactingLog(tmp_path)
    log.write(1, {"a": 1})
    log.write(1, {"b": 2})
    with open(log.path, "ab") as f:
        f.write(b'{"term":1,"command":{"c"')  # crash in the middle of an append
    again = CompactingLog(tmp_path)
    assert again.last_log_index == 2
    again.write(2, {"d": 4})
    assert CompactingLog(tmp_path).last_log_index == 3
    data = log.path.read_bytes().replace(b'{"b":2}', b'{"b":2')
    log.path.write_bytes(data)
    with pytest.raises(StorageCorrupt):
        CompactingLog(tmp_path)


def test_erase_truncates_in_place_and_never_a_committed_entry(tmp_path: Path) -> None:
    log = CompactingLog(tmp_path)
    for i in range(1, 6):
        log.write(1, {"i": i})
    log.commit_index = 2
    with pytest.raises(AssertionError, match="committed"):
        log.erase_from(2)
    log.erase_from(4)
    assert [e["command"]["i"] for e in CompactingLog(tmp_path).cache] == [1, 2, 3]


def test_compaction_keeps_indices_and_the_matching_suffix(tmp_path: Path) -> None:
    log = CompactingLog(tmp_path)
    for i in range(1, 11):
        log.write(1 if i < 8 else 2, {"i": i})
    log.compact_to(6, 1)
    assert (log.base_index, log.base_term, log.last_log_index) == (6, 1, 10)
    assert log[6] == {"term": 1, "command": None} and log[7]["command"] == {"i": 7}
    with pytest.raises(IndexError):
        log[5]
    again = CompactingLog(tmp_path, 6, 1)
    assert again.last_log_index == 10 and again.commit_index == 6
    again.compact_to(9, 3)  # a snapshot whose last entry we do not hold: discard the log
    assert (again.base_index, again.last_log_index) == (9, 9)


def test_log_is_reconciled_with_its_snapshot_at_load(tmp_path: Path) -> None:
    log = CompactingLog(tmp_path)
    for i in range(1, 6):
        log.write(1, {"i": i})
    again = CompactingLog(tmp_path, 3, 1)  # snapshot at 3; the log keeps 1..5 on purpose
    assert (again.base_index, again.last_log_index, again.last_applied) == (0, 5, 3)
    # crash after a snapshot from the leader was saved, before the log was rewritten
    again = CompactingLog(tmp_path, 9, 2)
    assert (again.base_index, again.last_log_index, again.commit_index) == (9, 9, 9)
    with pytest.raises(StorageCorrupt):
        CompactingLog(tmp_path, 0, 0)  # a log ahead of its snapshot: the snapshot was lost


def test_raftos_storage_loses_term_and_vote_on_crash_mid_write(tmp_path: Path) -> None:
    """FINDINGS 12: raftos truncates the file, then writes; a crash in between wipes it."""
    raftos.configure({"log_path": str(tmp_path)})
    st = raftos_storage.FileStorage("127.0.0.1:1")
    st.update({"term": 5, "voted_for": "127.0.0.1:2"})

    real = st.serializer

    class Crash:
        unpack = staticmethod(real.unpack)

        @staticmethod
        def pack(data: Any) -> bytes:
            raise OSError("power lost")  # after open(..., "wb") truncated the file

    st.serializer = Crash
    with pytest.raises(OSError):
        st.update({"term": 6})
    assert Path(st.filename).read_bytes() == b""  # term 5 and the vote are gone


def test_term_store_survives_crash_mid_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = DurableTermStore(tmp_path)
    st.update({"term": 5, "voted_for": "127.0.0.1:2"})

    def crash(*args: Any) -> None:
        raise OSError("power lost")

    monkeypatch.setattr(storage.os, "replace", crash)
    with pytest.raises(OSError):
        st.update({"term": 6})
    monkeypatch.undo()
    again = DurableTermStore(tmp_path)
    assert (again.term, again.voted_for) == (5, "127.0.0.1:2")


def test_term_store_fsyncs_and_clears_vote_with_new_term(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(storage.os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    st = DurableTermStore(tmp_path)
    st.update({"term": 1, "voted_for": "a"})
    assert len(synced) >= 2  # the file and its directory
    st.update({"term": 2})
    assert DurableTermStore(tmp_path).voted_for is None
    with pytest.raises(AssertionError, match="never decrease"):
        st.update({"term": 1})


def test_log_appends_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = CompactingLog(tmp_path)
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(storage.os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    log.append_many([{"term": 1, "command": {"a": 1}}, {"term": 1, "command": {"b": 1}}])
    assert len(synced) == 1  # one fsync per batch, before anyone is told


def test_one_process_per_raft_directory(tmp_path: Path) -> None:
    lock = DirLock(tmp_path)
    with pytest.raises(RuntimeError, match="in use"):
        DirLock(tmp_path)
    lock.release()
    DirLock(tmp_path).release()
