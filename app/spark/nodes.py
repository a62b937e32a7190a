"""Talking to whichever node answers: failover over the ``servers`` list.

Every node serves the whole API (it forwards to the partition leader), so any
reachable node will do. A :class:`NodePool` keeps one :class:`app.client.Client`
to the node that last answered and moves to the next URL on a transport error
(refused, reset, timed out). Retryable server answers (``NOT_LEADER`` while a
leader moves, ``TIMEOUT``, ``NOT_ENOUGH_REPLICAS`` while the ISR recovers) are
retried with a short backoff. Pools are created inside executor tasks and
never pickled; only the URL tuple travels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import httpx

from app.client import Client, TidelogError

T = TypeVar("T")

RETRYABLE_CODES = frozenset({"NOT_LEADER", "TIMEOUT", "NOT_ENOUGH_REPLICAS"})
"""Answers that mean "not now" rather than "no": a later attempt may succeed."""


class NoNodeAvailable(ConnectionError):
    """Every URL in ``servers`` failed at the transport level."""


class NodePool:
    """Round-robin failover over node URLs; not thread-safe (one per task)."""

    def __init__(self, servers: Sequence[str], timeout_s: float = 30.0, retries: int = 5) -> None:
        if not servers:
            raise ValueError("NodePool needs at least one server URL")
        self.servers = list(servers)
        self.timeout_s = timeout_s
        self.retries = retries
        self._index = 0
        self._client: Client | None = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> NodePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _current(self) -> Client:
        if self._client is None:
            self._client = Client(self.servers[self._index], timeout_s=self.timeout_s)
        return self._client

    def _advance(self) -> None:
        self.close()
        self._index = (self._index + 1) % len(self.servers)

    def call(self, fn: Callable[[Client], T], *, retry_server_errors: bool = True) -> T:
        """Run ``fn`` against a node, failing over and retrying.

        A transport error moves to the next URL; after every URL failed once
        in a row, :class:`NoNodeAvailable` is raised with each URL's error.
        With ``retry_server_errors`` a retryable :class:`TidelogError` is tried
        again up to ``retries`` times (backoff 0.1 s doubling to 2 s); any
        other ``TidelogError`` propagates at once.
        """
        transport_errors: list[str] = []
        attempts = 0
        backoff_s = 0.1
        while True:
            client = self._current()
            try:
                result = fn(client)
            except httpx.TransportError as e:
                transport_errors.append(f"{client.base_url}: {type(e).__name__}: {e}")
                self._advance()
                if len(transport_errors) >= len(self.servers):
                    raise NoNodeAvailable(
                        "tidelog: no node in servers answered: " + "; ".join(transport_errors)
                    ) from e
                continue
            except TidelogError as e:
                if not retry_server_errors or e.code not in RETRYABLE_CODES or attempts >= self.retries:
                    raise
                attempts += 1
                time.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, 2.0)
                if e.code == "NOT_LEADER":  # the node may be stale; another may know better
                    self._advance()
                continue
            return result
