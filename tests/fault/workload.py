"""Producers and consumers that record everything they see into the history.

One producer per partition sends acks=all requests of one record each, with a
unique id that is never retried: a failed or timed-out attempt is recorded as
indeterminate (it may commit or not) and the next attempt carries a new id, so
any id found twice in a log was duplicated by the cluster, not by the client.
A producer sticks to the node that last answered and moves to the next one on
any failure (nodes forward to the partition leader), as a real client would.

One consumer per partition long-polls committed records from its next offset
through any node, following leader changes the same way; every non-empty answer
is recorded with the offsets and ids it returned.

httpx is used directly (not ``app.client.Client``) for one reason: each call
needs its own short timeout so a paused or cut-off node costs seconds, not the
client's default 30 s, which would show up as fake unavailability.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import orjson

from app.client import problem_of
from tests.fault.history import History

#: Produce ``timeout_ms`` (the server's acks=all wait) and the client's own limit above it.
PRODUCE_TIMEOUT_MS = 3000
REQUEST_TIMEOUT_S = 6.0
FETCH_WAIT_MS = 1000
RETRY_BACKOFF_S = 0.1


class _Worker(threading.Thread):
    def __init__(self, name: str, hist: History, topic: str, partition: int, urls: list[str],
                 stop: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.hist = hist
        self.topic = topic
        self.partition = partition
        self.urls = urls
        self.stop_event = stop
        self.node_i = partition % len(urls)
        self.http = httpx.Client(timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=2.0), trust_env=False)
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        return self.urls[self.node_i]

    @property
    def node(self) -> int:
        return self.node_i + 1

    def rotate(self) -> None:
        self.node_i = (self.node_i + 1) % len(self.urls)

    def run(self) -> None:
        try:
            self.loop()
        except BaseException as e:  # surfaced by the runner: a crashed worker invalidates the run
            self.error = e
            raise
        finally:
            self.http.close()

    def loop(self) -> None:
        raise NotImplementedError


class Producer(_Worker):
    def __init__(self, hist: History, topic: str, partition: int, urls: list[str],
                 stop: threading.Event, rate_hz: float) -> None:
        super().__init__(f"producer-p{partition}", hist, topic, partition, urls, stop)
        self.interval_s = 1.0 / rate_hz
        self.seq = 0

    def loop(self) -> None:
        path = f"/v1/topics/{self.topic}/partitions/{self.partition}/records"
        params: dict[str, str | int] = {"acks": "all", "timeout_ms": PRODUCE_TIMEOUT_MS}
        while not self.stop_event.is_set():
            rid = f"p{self.partition}-{self.seq}"
            self.seq += 1
            body = orjson.dumps({"records": [{"value": {"id": rid}}]})
            node = self.node
            self.hist.add("invoke", id=rid, partition=self.partition, node=node)
            started = self.hist.now()
            try:
                resp = self.http.post(self.url + path, params=params, content=body,
                                      headers={"content-type": "application/json"})
            except httpx.HTTPError as e:
                self.hist.add("fail", id=rid, partition=self.partition, node=node, code=type(e).__name__)
                self.rotate()
                self.stop_event.wait(RETRY_BACKOFF_S)
                continue
            problem = problem_of(resp)
            if problem is not None:
                self.hist.add("fail", id=rid, partition=self.partition, node=node, code=problem.code,
                              status=problem.status)
                self.rotate()
                self.stop_event.wait(RETRY_BACKOFF_S)
                continue
            offset = orjson.loads(resp.content)["offsets"][0]["offset"]
            self.hist.add("ok", id=rid, partition=self.partition, node=node, offset=offset,
                          invoked=started)
            self.stop_event.wait(max(0.0, self.interval_s - (self.hist.now() - started)))


class Consumer(_Worker):
    def __init__(self, hist: History, topic: str, partition: int, urls: list[str],
                 stop: threading.Event) -> None:
        super().__init__(f"consumer-p{partition}", hist, topic, partition, urls, stop)
        self.next_offset = 0
        self.node_i = (partition + 1) % len(urls)

    def loop(self) -> None:
        path = f"/v1/topics/{self.topic}/partitions/{self.partition}/records"
        while not self.stop_event.is_set():
            node = self.node
            params: dict[str, Any] = {"offset": self.next_offset, "max_records": 1000,
                                      "max_wait_ms": FETCH_WAIT_MS, "isolation": "committed"}
            try:
                resp = self.http.get(self.url + path, params=params)
            except httpx.HTTPError as e:
                self.hist.add("read-fail", partition=self.partition, node=node, code=type(e).__name__)
                self.rotate()
                self.stop_event.wait(RETRY_BACKOFF_S)
                continue
            problem = problem_of(resp)
            if problem is not None:
                self.hist.add("read-fail", partition=self.partition, node=node, code=problem.code,
                              status=problem.status, offset=self.next_offset)
                self.rotate()
                self.stop_event.wait(RETRY_BACKOFF_S)
                continue
            d = orjson.loads(resp.content)
            if d["records"]:
                recs = [[r["offset"], _id_of(r["value"])] for r in d["records"]]
                self.hist.add("read", partition=self.partition, node=node, offset=self.next_offset,
                              records=recs, hw=d["high_watermark"])
                self.next_offset = d["next_offset"]


def _id_of(value: Any) -> str | None:
    """Our records are ``{"id": ...}``; anything else is a record we never wrote."""
    return value.get("id") if isinstance(value, dict) else None


def read_partition(url: str, topic: str, partition: int) -> list[list[Any]]:
    """The whole committed log of a partition as ``[offset, id]`` pairs, through ``url``."""
    out: list[list[Any]] = []
    nxt = 0
    with httpx.Client(timeout=30.0, trust_env=False) as http:
        while True:
            resp = http.get(f"{url}/v1/topics/{topic}/partitions/{partition}/records",
                            params={"offset": nxt, "max_records": 5000, "isolation": "committed"})
            problem = problem_of(resp)
            if problem is not None:
                raise problem
            d = orjson.loads(resp.content)
            if not d["records"]:
                return out
            out += [[r["offset"], _id_of(r["value"])] for r in d["records"]]
            nxt = d["next_offset"]
