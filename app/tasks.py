"""Stopping background tasks: one helper for every component's ``stop``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


async def cancel_and_wait(tasks: Iterable[asyncio.Task[None] | None]) -> None:
    """Cancel every task (``None`` is skipped), then wait for each to finish.

    Cancelling all before awaiting any lets them unwind concurrently; a
    task's own ``CancelledError`` is swallowed, any other exception raised.
    """
    live = [t for t in tasks if t is not None]
    for t in live:
        t.cancel()
    for t in live:
        with contextlib.suppress(asyncio.CancelledError):
            await t
