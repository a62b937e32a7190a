"""A small HTTP client for tidelog, shared by the CLI, tests, benchmarks and the Spark source.

Thin over httpx: one keep-alive connection pool, orjson for bodies, errors
raised as :class:`TidelogError` carrying the problem+json ``code``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson


class TidelogError(Exception):
    """A problem+json answer; ``code`` is the stable error code."""

    def __init__(self, status: int, code: str, detail: str, body: dict[str, Any]) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.body = body


def problem_of(resp: httpx.Response) -> TidelogError | None:
    """The error a 4xx/5xx answer carries (its problem+json ``code``), or None if it succeeded."""
    if resp.status_code < 400:
        return None
    try:
        body = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    return TidelogError(
        resp.status_code,
        str(body.get("code", "HTTP_ERROR")),
        str(body.get("detail", resp.text[:200])),
        body,
    )


def _raise_for(resp: httpx.Response) -> None:
    problem = problem_of(resp)
    if problem is not None:
        raise problem


@dataclass(slots=True)
class FetchPage:
    records: list[dict[str, Any]]
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


class Client:
    """Synchronous client. ``base_url`` is any node (``http://host:port``)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _json(self, method: str, url: str, **kw: Any) -> Any:
        resp = self.http.request(method, url, **kw)
        _raise_for(resp)
        if resp.status_code == 204 or not resp.content:
            return None
        return orjson.loads(resp.content)

    # ---- topics --------------------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body = {"name": name, "partitions": partitions, "replication_factor": replication_factor}
        if config:
            body["config"] = config
        return self._json("POST", "/v1/topics", content=orjson.dumps(body),
                          headers={"content-type": "application/json"})

    def list_topics(self) -> list[dict[str, Any]]:
        return self._json("GET", "/v1/topics")["topics"]

    def describe_topic(self, name: str) -> dict[str, Any]:
        return self._json("GET", f"/v1/topics/{name}")

    def delete_topic(self, name: str) -> None:
        self._json("DELETE", f"/v1/topics/{name}")

    def cluster(self) -> dict[str, Any]:
        return self._json("GET", "/v1/cluster")

    # ---- records -------------------------------------------------------------------------
    def produce(
        self,
        topic: str,
        records: Iterable[dict[str, Any]],
        *,
        partition: int | None = None,
        acks: str = "all",
        timeout_ms: int = 5000,
    ) -> list[dict[str, Any]]:
        """Produce one request; returns ``[{"partition", "offset"}]`` in request order."""
        url = (
            f"/v1/topics/{topic}/records"
            if partition is None
            else f"/v1/topics/{topic}/partitions/{partition}/records"
        )
        body = orjson.dumps({"records": list(records)})
        out = self._json(
            "POST", url, content=body, params={"acks": acks, "timeout_ms": timeout_ms},
            headers={"content-type": "application/json"},
        )
        return out["offsets"]

    def fetch(
        self,
        topic: str,
        partition: int,
        offset: int | str = "earliest",
        *,
        max_records: int = 500,
        max_bytes: int = 1 << 20,
        max_wait_ms: int = 0,
        isolation: str = "committed",
        timestamp: int | None = None,
    ) -> FetchPage:
        params: dict[str, Any] = {
            "max_records": max_records, "max_bytes": max_bytes,
            "max_wait_ms": max_wait_ms, "isolation": isolation,
        }
        if timestamp is not None:
            params["timestamp"] = timestamp
        else:
            params["offset"] = offset
        d = self._json("GET", f"/v1/topics/{topic}/partitions/{partition}/records", params=params,
                       timeout=max(30.0, max_wait_ms / 1000 + 10))
        return FetchPage(d["records"], d["next_offset"], d["high_watermark"],
                         d["log_start_offset"], d["log_end_offset"])

    def consume(
        self,
        topic: str,
        partition: int,
        offset: int | str = "earliest",
        *,
        follow: bool = False,
        max_wait_ms: int = 1000,
        isolation: str = "committed",
    ) -> Iterator[dict[str, Any]]:
        """Iterate records from ``offset``; with ``follow`` keep long-polling forever."""
        nxt: int | str = offset
        while True:
            page = self.fetch(topic, partition, nxt, max_records=1000,
                              max_wait_ms=max_wait_ms if follow else 0, isolation=isolation)
            yield from page.records
            nxt = page.next_offset
            if not page.records and not follow:
                return
