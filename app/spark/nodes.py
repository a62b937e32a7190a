"""Talking to whichever node answers: failover over the ``servers`` list.

Every node serves the whole API (it forwards to the partition leader), so any
reachable node will do. A :class:`NodePool` keeps one :class:`NodeClient`
to the node that last answered and moves to the next URL on a transport error
(refused, reset, timed out). Retryable server answers (``NOT_LEADER`` while a
leader moves, ``UNAVAILABLE`` when the node could not reach the leader,
``TIMEOUT``, ``NOT_ENOUGH_REPLICAS`` while the ISR recovers) are retried with a
short backoff; for produce that is where at-least-once duplicates come from. Pools are created inside executor tasks and
never pickled; only the URL tuple travels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import httpx
import orjson

from app.client import FetchPage, TidelogError, problem_of

T = TypeVar("T")

RETRYABLE_CODES = frozenset({"NOT_LEADER", "UNAVAILABLE", "TIMEOUT", "NOT_ENOUGH_REPLICAS"})
"""Answers that mean "not now" rather than "no": a later attempt may succeed."""


class NoNodeAvailable(ConnectionError):
    """Every URL in ``servers`` failed at the transport level."""


class NodeClient:
    """The few API calls the data source needs, over one keep-alive connection.

    Shares the error and page types of ``app.client`` (the CLI's client); this
    class adds what executors need on top: failover over ``servers`` and
    retries of "not now" answers.
    """

    def __init__(self, base_url: str, timeout_s: float) -> None:
        self.base_url = base_url
        self.http = httpx.Client(base_url=base_url, timeout=timeout_s)

    def close(self) -> None:
        self.http.close()

    def _json(self, resp: httpx.Response) -> Any:
        problem = problem_of(resp)
        if problem is not None:
            raise problem
        return orjson.loads(resp.content)

    def describe_topic(self, topic: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._json(self.http.get(f"/v1/topics/{topic}")))

    def fetch(self, topic: str, partition: int, offset: int | str | None = None, *,
              timestamp: int | None = None, max_records: int = 500,
              isolation: str = "committed", max_wait_ms: int = 0) -> FetchPage:
        """Fetch from ``offset`` (or the first record at/after ``timestamp`` ms).

        ``max_wait_ms`` > 0 long-polls until records past ``offset`` are visible.
        """
        params: dict[str, Any] = {"max_records": max_records, "isolation": isolation,
                                  "max_bytes": 64 << 20, "max_wait_ms": max_wait_ms}
        if timestamp is not None:
            params["timestamp"] = timestamp
        else:
            params["offset"] = offset
        d = self._json(self.http.get(f"/v1/topics/{topic}/partitions/{partition}/records",
                                     params=params))
        return FetchPage(d["records"], int(d["next_offset"]), int(d["high_watermark"]),
                         int(d["log_start_offset"]), int(d["log_end_offset"]))

    def produce(self, topic: str, records: list[dict[str, Any]], *, acks: str,
                timeout_ms: int) -> list[dict[str, Any]]:
        """One produce request; ``[{"partition", "offset"}]`` in request order."""
        resp = self.http.post(f"/v1/topics/{topic}/records",
                              params={"acks": acks, "timeout_ms": timeout_ms},
                              content=orjson.dumps({"records": records}),
                              headers={"content-type": "application/json"})
        return cast(list[dict[str, Any]], self._json(resp)["offsets"])


class NodePool:
    """Round-robin failover over node URLs; not thread-safe (one per task)."""

    def __init__(self, servers: Sequence[str], timeout_s: float = 30.0, retries: int = 5) -> None:
        if not servers:
            raise ValueError("NodePool needs at least one server URL")
        self.servers = list(servers)
        self.timeout_s = timeout_s
        self.retries = retries
        self._index = 0
        self._client: NodeClient | None = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> NodePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _current(self) -> NodeClient:
        if self._client is None:
            self._client = NodeClient(self.servers[self._index], self.timeout_s)
        return self._client

    def _advance(self) -> None:
        self.close()
        self._index = (self._index + 1) % len(self.servers)

    def call(self, fn: Callable[[NodeClient], T], *, retry_server_errors: bool = True) -> T:
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
                retryable = retry_server_errors and e.code in RETRYABLE_CODES
                if not retryable or attempts >= self.retries:
                    raise
                attempts += 1
                time.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, 2.0)
                if e.code in ("NOT_LEADER", "UNAVAILABLE"):  # another node may do better
                    self._advance()
                continue
            return result
