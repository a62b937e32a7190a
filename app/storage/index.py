"""Sparse offset and time indexes of one segment.

Both are kept in memory as flat arrays (cheap: one entry per
``index_interval_bytes`` of log). An entry is added at the start of a batch
once ``index_interval_bytes`` have been written since the previous entry, so
the log is never scanned for more than about that much to find an offset.

The files are written whole (tmp file + rename) when a segment is sealed,
truncated or closed, never per append: the active segment is always rebuilt
from its log on start (its tail must be CRC-checked anyway), so only sealed
segments' files are ever trusted, and those no longer change.

Offset index entry: ``relative_offset uint32, position uint32`` (8 bytes).
Time index entry: ``max_timestamp_before int64, relative_offset uint32``
(12 bytes), where ``max_timestamp_before`` is the largest record timestamp
in the segment *before* that batch (-1 before the first batch); it never
decreases, so a bisect finds the last batch before which every record is
older than a target time.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

_OFF = struct.Struct(">II")
_TIME = struct.Struct(">qI")


def _u32() -> array[int]:
    """An array of unsigned 32-bit ints (relative offsets and positions fit by construction)."""
    return array("I") if array("I").itemsize == 4 else array("L")


def fsync_path(path: Path) -> None:
    """fsync a file or directory by path; a missing path is ignored."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SegmentIndex:
    """Offset + time index of one segment; ``positions[i]`` is where ``rel_offsets[i]`` starts.

    Mutated only by the thread that appends; reader threads bisect the arrays
    (appends to an ``array`` are atomic under the GIL, and entries are only
    removed under the log's exclusive lock).
    """

    def __init__(self, offset_path: Path, time_path: Path) -> None:
        self.offset_path = offset_path
        self.time_path = time_path
        self.rel_offsets = _u32()
        self.positions = _u32()
        self.ts_before = array("q")
        self.unsaved = False  # memory differs from the files

    def __len__(self) -> int:
        return len(self.positions)

    def add(self, rel_offset: int, position: int, max_ts_before: int) -> None:
        self.rel_offsets.append(rel_offset)
        self.positions.append(position)
        self.ts_before.append(max_ts_before)
        self.unsaved = True

    def floor(self, rel_offset: int) -> int:
        """Index of the last entry with ``rel_offsets[i] <= rel_offset``; -1 if none."""
        return bisect.bisect_right(self.rel_offsets, rel_offset) - 1

    def floor_time(self, ts: int) -> int:
        """Index of the last entry before which every record is older than ``ts``; -1 if none.

        Scanning from that entry finds the first record with timestamp >= ``ts``.
        """
        return bisect.bisect_left(self.ts_before, ts) - 1

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at or past ``position`` (memory only; call ``save``)."""
        i = bisect.bisect_left(self.positions, position)
        if i < len(self.positions):
            del self.rel_offsets[i:]
            del self.positions[i:]
            del self.ts_before[i:]
            self.unsaved = True

    def clear(self) -> None:
        self.rel_offsets = _u32()
        self.positions = _u32()
        self.ts_before = array("q")
        self.unsaved = True

    def save(self) -> None:
        """Write both files from memory, each atomically (tmp + rename); not fsynced."""
        rel, pos, tsb = self.rel_offsets, self.positions, self.ts_before
        off = b"".join(_OFF.pack(o, p) for o, p in zip(rel, pos, strict=True))
        tim = b"".join(_TIME.pack(t, o) for t, o in zip(tsb, rel, strict=True))
        for path, data in ((self.offset_path, off), (self.time_path, tim)):
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        self.unsaved = False

    def fsync_files(self) -> None:
        fsync_path(self.offset_path)
        fsync_path(self.time_path)

    def load(self, log_size: int) -> bool:
        """Load both files; False if missing or structurally inconsistent (caller rebuilds).

        Checks: whole entries, equal counts, first entry ``(0, 0)``, offsets
        and positions strictly increasing, timestamps non-decreasing, every
        position inside the log, both files naming the same offsets. The
        caller also checks entries against the log's batch headers.
        """
        try:
            off = self.offset_path.read_bytes()
            tim = self.time_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(off) % _OFF.size or len(tim) % _TIME.size or len(off) // 8 != len(tim) // 12:
            return False
        rel, pos, tsb = _u32(), _u32(), array("q")
        prev_o = prev_p = -1
        prev_t = -2
        for (o, p), (t, o2) in zip(_OFF.iter_unpack(off), _TIME.iter_unpack(tim), strict=True):
            if o != o2 or o <= prev_o or p <= prev_p or t < prev_t or p >= log_size:
                return False
            rel.append(o)
            pos.append(p)
            tsb.append(t)
            prev_o, prev_p, prev_t = o, p, t
        if log_size and (not pos or pos[0] != 0 or rel[0] != 0):
            return False
        self.rel_offsets, self.positions, self.ts_before = rel, pos, tsb
        self.unsaved = False
        return True

    def delete_files(self) -> None:
        for p in (self.offset_path, self.time_path):
            p.unlink(missing_ok=True)
