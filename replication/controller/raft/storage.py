"""Durable raft storage that replaces raftos's ``FileStorage`` and ``Log``.

Why replace rather than patch: raftos writes its term/vote file by truncate-then-write with
no fsync (FINDINGS 12: a crash can wipe term and vote, which breaks Raft §5.2/§5.4 safety),
frames its log with newlines that msgpack output may contain (FINDINGS 1), re-reads the
whole log every 5 writes and rewrites the whole file on every truncation (FINDINGS 2, P1),
and has no snapshot base, so the log grows without bound (FINDINGS 13).

These classes keep the attribute/method names raftos's ``state.py`` uses (``term``,
``voted_for``, ``exists``, ``update``; ``log[i]``, ``write``, ``erase_from``,
``last_log_index``, ``last_log_term``, ``commit_index``...) so unpatched raftos handlers can
still run against them; the negative tests rely on that.

Layout of the raft directory (one node per directory, guarded by ``flock``):
  meta.json      {"term": int, "voted_for": str|null}   atomic replace + fsync
  snapshot.json  {"index", "term", "state": {...}}       atomic replace + fsync
  log.jsonl      header line {"base_index", "base_term"} then one JSON entry per line,
                 appended and fsynced before any reply that depends on it (Raft §5.3).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import StorageCorrupt

META_FILE = "meta.json"
LOG_FILE = "log.jsonl"
SNAPSHOT_FILE = "snapshot.json"
LOCK_FILE = "LOCK"


def dumps(value: Any) -> bytes:
    """Compact JSON; ``json`` escapes newlines inside strings, so a line is one record."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def fsync_dir(path: Path) -> None:
    """Make a rename or file creation in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a crash leaves either the old or the new content.

    Write a temporary file, fsync it, rename over the target, fsync the directory.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


class DirLock:
    """An exclusive ``flock`` on the raft directory: two processes must never share a log."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise RuntimeError(f"raft directory {directory} is in use by another process") from None

    def release(self) -> None:
        """Drop the lock; safe to call twice."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class DurableTermStore:
    """Replacement for raftos ``FileStorage``: current term and vote, persisted atomically.

    Raft §5.2 requires ``currentTerm`` and ``votedFor`` to survive restarts; raising the
    term clears the vote in the same atomic write (the vote belongs to one term), which is
    the half of patch V1 (FINDINGS 4) that raftos's ``validate_term`` needs, since it only
    writes ``term``.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / META_FILE
        self.cache: dict[str, Any] = {}
        if self.path.exists():
            try:
                self.cache = json.loads(self.path.read_bytes())
            except ValueError as exc:  # atomic_write never leaves a torn file
                raise StorageCorrupt(f"{self.path}: {exc}") from exc

    def exists(self, name: str) -> bool:
        return name in self.cache

    def __getitem__(self, name: str) -> Any:
        return self.cache[name]

    def update(self, kwargs: dict[str, Any]) -> None:
        """Merge ``kwargs`` and persist; a higher term without a vote resets ``voted_for``."""
        new = dict(self.cache)
        rising = "term" in kwargs and kwargs["term"] > new.get("term", 0)
        if rising and "voted_for" not in kwargs:
            new["voted_for"] = None
        new.update(kwargs)
        if new.get("term", 0) < self.cache.get("term", 0):
            raise AssertionError("raft term must never decrease (Raft §5.1)")
        if new == self.cache and self.path.exists():
            return
        atomic_write(self.path, dumps(new))
        self.cache = new

    @property
    def term(self) -> int:
        return int(self.cache.get("term", 0))

    @property
    def voted_for(self) -> str | None:
        value = self.cache.get("voted_for")
        return None if value is None else str(value)


class CompactingLog:
    """Replacement for raftos ``Log``: indices start at 1 after an optional compacted base.

    ``base_index``/``base_term`` describe the last entry dropped from the log; the snapshot
    (Raft §7) is at or after it — entries between the two are kept on purpose so a follower
    slightly behind still catches up with AppendEntries instead of a whole snapshot;
    ``log[base_index]`` returns a stand-in entry with the base term so ``prev_log_term``
    lookups keep working; lower indices raise ``IndexError`` (compacted).
    Truncation (``erase_from``) cuts the file at a remembered byte offset instead of
    rewriting it (raftos rewrote the whole log on every stale AppendEntries, FINDINGS 2).
    """

    def __init__(self, directory: Path, snap_index: int = 0, snap_term: int = 0) -> None:
        self.path = directory / LOG_FILE
        self.base_index = 0
        self.base_term = 0
        self.cache: list[dict[str, Any]] = []
        self._offsets: list[int] = []  # byte offset where entry i (0-based in cache) starts
        self.commit_index = 0
        self.last_applied = 0
        self._load()
        if self.base_index > snap_index:
            # The log is compacted only after its snapshot is durable, so its base can
            # never be ahead of the snapshot: the snapshot file was lost or replaced.
            raise StorageCorrupt(f"{self.path}: log base {self.base_index} > snapshot {snap_index}")
        if self.term_at(snap_index) != snap_term:
            # A snapshot installed from the leader, and the crash came before the log was
            # rewritten (or our tail diverges from it): the log restarts at the snapshot.
            self.compact_to(snap_index, snap_term)
        # Entries up to the snapshot are applied (they live in the state machine).
        self.commit_index = snap_index
        self.last_applied = snap_index
        self.next_index: dict[str, int] | None = None
        self.match_index: dict[str, int] | None = None

    # -- loading -------------------------------------------------------------------------
    def _load(self) -> None:
        if not self.path.exists():
            self._rewrite(0, 0, [])
            return
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        torn = lines.pop()  # text after the last newline: empty, or a torn append
        try:
            header = json.loads(lines[0])
            base_index, base_term = int(header["base_index"]), int(header["base_term"])
        except (IndexError, ValueError, KeyError, TypeError) as exc:
            raise StorageCorrupt(f"{self.path}: bad header") from exc
        offset = len(lines[0]) + 1
        entries: list[dict[str, Any]] = []
        offsets: list[int] = []
        for number, line in enumerate(lines[1:], start=2):
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise StorageCorrupt(f"{self.path}: line {number} unreadable") from exc
            entries.append(entry)
            offsets.append(offset)
            offset += len(line) + 1
        if torn:
            # An append that never completed its fsync; it was never acknowledged.
            with open(self.path, "r+b") as f:
                f.truncate(offset)
                os.fsync(f.fileno())
        self.base_index, self.base_term = base_index, base_term
        self.cache, self._offsets = entries, offsets

    def _rewrite(self, base_index: int, base_term: int, entries: list[dict[str, Any]]) -> None:
        header = dumps({"base_index": base_index, "base_term": base_term}) + b"\n"
        body = [dumps(e) + b"\n" for e in entries]
        atomic_write(self.path, header + b"".join(body))
        self.base_index, self.base_term = base_index, base_term
        self.cache = list(entries)
        self._offsets = []
        offset = len(header)
        for line in body:
            self._offsets.append(offset)
            offset += len(line)

    # -- raftos interface ------------------------------------------------------------------
    def __getitem__(self, index: int) -> dict[str, Any]:
        if index == self.base_index and index > 0:
            return {"term": self.base_term, "command": None}
        pos = index - self.base_index - 1
        if pos < 0 or pos >= len(self.cache):
            raise IndexError(index)
        return self.cache[pos]

    def __bool__(self) -> bool:
        return self.last_log_index > 0

    def __len__(self) -> int:
        return self.last_log_index

    @property
    def last_log_index(self) -> int:
        """Index of the last entry, counting compacted ones; 0 when nothing was ever written."""
        return self.base_index + len(self.cache)

    @property
    def last_log_term(self) -> int:
        return int(self.cache[-1]["term"]) if self.cache else self.base_term

    def term_at(self, index: int) -> int | None:
        """Term of entry ``index``; 0 for index 0, None when compacted away or absent."""
        if index == 0:
            return 0
        try:
            return int(self[index]["term"])
        except IndexError:
            return None

    def write(self, term: int, command: Any) -> dict[str, Any]:
        """Append one entry durably (raftos signature)."""
        entry = {"term": term, "command": command}
        self.append_many([entry])
        return entry

    def append_many(self, entries: list[dict[str, Any]]) -> None:
        """Append entries with one write and one fsync (before anyone is told, Raft §5.3)."""
        if not entries:
            return
        offset = self.path.stat().st_size
        chunks = []
        for entry in entries:
            line = dumps(entry) + b"\n"
            self._offsets.append(offset)
            offset += len(line)
            chunks.append(line)
        with open(self.path, "ab") as f:
            f.write(b"".join(chunks))
            f.flush()
            os.fsync(f.fileno())
        self.cache.extend(entries)

    def erase_from(self, index: int) -> None:
        """Drop entry ``index`` and all after it; never a committed one (Raft §5.3, §5.4)."""
        if index <= self.commit_index:
            raise AssertionError(f"refusing to erase committed entry {index} <= {self.commit_index}")
        pos = index - self.base_index - 1
        if pos >= len(self.cache):
            return
        with open(self.path, "r+b") as f:
            f.truncate(self._offsets[pos])
            os.fsync(f.fileno())
        del self.cache[pos:]
        del self._offsets[pos:]

    def read(self) -> list[dict[str, Any]]:
        return list(self.cache)

    def entries_from(self, index: int, max_count: int) -> Iterator[dict[str, Any]]:
        """Entries ``index``.. (at most ``max_count``); ``index`` must be above the base."""
        pos = index - self.base_index - 1
        if pos < 0:
            raise IndexError(index)
        yield from self.cache[pos : pos + max_count]

    # -- compaction --------------------------------------------------------------------------
    def compact_to(self, index: int, term: int) -> None:
        """Drop entries up to ``index`` (a snapshot covering them must be durable first).

        Entries after ``index`` are kept when ours has ``term`` at ``index`` (Raft §7 rule 6);
        otherwise the log is discarded and restarts at the snapshot.
        """
        if index <= self.base_index:
            return
        keep: list[dict[str, Any]] = []
        if self.term_at(index) == term:
            keep = self.cache[index - self.base_index :]
        self._rewrite(index, term, keep)
        self.commit_index = max(self.commit_index, index)
        self.last_applied = max(self.last_applied, index)


@contextlib.contextmanager
def locked_dir(directory: Path) -> Iterator[DirLock]:
    """Hold the directory lock for a ``with`` block (tests and tools)."""
    lock = DirLock(directory)
    try:
        yield lock
    finally:
        lock.release()


class SnapshotStore:
    """The latest snapshot (Raft §7) as one atomically replaced JSON file.

    The serialized bytes are kept in memory because the leader streams them to followers
    that are behind the compacted log prefix (``install_snapshot``).
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / SNAPSHOT_FILE
        self._blob: bytes | None = None
        self.index = 0
        self.term = 0

    def load(self) -> dict[str, Any] | None:
        """Read the snapshot from disk; None when there is none yet."""
        if not self.path.exists():
            return None
        blob = self.path.read_bytes()
        try:
            snap: dict[str, Any] = json.loads(blob)
        except ValueError as exc:  # atomic_write never leaves a torn file
            raise StorageCorrupt(f"{self.path}: {exc}") from exc
        self._blob, self.index, self.term = blob, int(snap["index"]), int(snap["term"])
        return snap

    def save(self, snap: dict[str, Any]) -> bytes:
        """Persist ``snap`` durably and return its bytes."""
        blob = dumps(snap)
        self.save_blob(blob, int(snap["index"]), int(snap["term"]))
        return blob

    def save_blob(self, blob: bytes, index: int, term: int) -> None:
        """Persist an already serialized snapshot (received from the leader)."""
        atomic_write(self.path, blob)
        self._blob, self.index, self.term = blob, index, term

    def blob(self) -> bytes:
        """Bytes of the current snapshot; an empty-state snapshot at index 0 if none."""
        if self._blob is None:
            self._blob = dumps({"index": 0, "term": 0, "state": {}, "requests": [], "pending": None})
        return self._blob
