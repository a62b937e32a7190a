"""The run's history: every operation and fault as one JSON object, in completion order.

Times are seconds since the run started (monotonic clock), so fault windows and
unavailability windows line up without wall-clock skew. Threads append
concurrently; one lock keeps the order of ``t`` equal to the order of events.
With a ``path`` every event is also written through to it at once, so a run
that hangs or is killed still leaves its history up to that point.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson


class History:
    def __init__(self, path: Path | None = None) -> None:
        self.t0 = time.monotonic()
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._file = open(path, "wb") if path is not None else None  # noqa: SIM115 - closed by close()

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 4)

    def add(self, type_: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            ev = {"t": self.now(), "type": type_, **fields}
            self.events.append(ev)
            if self._file is not None:
                self._file.write(orjson.dumps(ev, option=orjson.OPT_NON_STR_KEYS) + b"\n")
                self._file.flush()
            return ev

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["type"] in types]

    @classmethod
    def load(cls, path: Path) -> History:
        h = cls()
        h.events = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        return h
