"""Waiting for a condition in tests: poll with a deadline, never sleep a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx

from app.client import TidelogError

T = TypeVar("T")

TRANSIENT = (httpx.HTTPError, TidelogError, KeyError, ValueError)
"""Errors a poll may meet while a cluster converges (a node down, a field not there yet)."""


def eventually(fn: Callable[[], T | None], timeout_s: float = 30.0, what: str = "", poll_s: float = 0.05) -> T:
    """Poll ``fn`` until it returns something truthy and return it.

    Transient errors count as "not yet"; at the deadline an AssertionError
    names ``what`` and the last value or error seen.
    """
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
            last = v
        except TRANSIENT as e:
            last = e
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what or fn} (last: {last!r})")
