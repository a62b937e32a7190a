"""A real HTTP webhook receiver on loopback, run in a thread by the test.

It records every request (headers, parsed body, answer status) and can be
told to fail: the first ``fail_first`` requests, or every request while
``fail_always`` is set. It checks ``Tidelog-Signature`` itself with the
standard library (not with tidelog's ``signing`` module), so a signing bug
cannot hide behind a matching verification bug.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes
    status: int
    signature_ok: bool | None


@dataclass
class Receiver:
    secret: str | None = None
    fail_first: int = 0
    fail_always: bool = False
    fail_status: int = 503
    delay_s: float = 0.0
    """Time each answer takes (a slow subscriber keeps delivery in flight for a while)."""
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    active: int = 0
    """Requests being handled right now."""

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                with outer.lock:
                    outer.active += 1
                try:
                    self._handle()
                finally:
                    with outer.lock:
                        outer.active -= 1

            def _handle(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = outer._answer()
                if outer.delay_s:
                    time.sleep(outer.delay_s)
                headers = {k.lower(): v for k, v in self.headers.items()}
                sig_ok = None
                if outer.secret is not None:
                    sig_ok = check_signature(outer.secret, headers.get("tidelog-signature", ""), raw)
                with outer.lock:
                    outer.requests.append(Received(headers, json.loads(raw), raw, status, sig_ok))
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"no")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def idle(self) -> bool:
        with self.lock:
            return self.active == 0

    def _answer(self) -> int:
        with self.lock:
            if self.fail_always:
                return self.fail_status
            failed = sum(1 for r in self.requests if r.status >= 300)
            if failed < self.fail_first:
                return self.fail_status
            return 200

    # ---- what arrived -----------------------------------------------------------------------
    def accepted(self) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.status < 300]

    def offsets(self, partition: int) -> list[int]:
        """Offsets of accepted records of ``partition`` in arrival order (duplicates kept)."""
        return [
            rec["offset"] for r in self.accepted() if r.body["partition"] == partition
            for rec in r.body["records"]
        ]

    def values(self, partition: int) -> dict[int, Any]:
        return {
            rec["offset"]: rec["value"] for r in self.accepted() if r.body["partition"] == partition
            for rec in r.body["records"]
        }

    def wait_offsets(self, partition: int, count: int, timeout_s: float = 30.0) -> list[int]:
        """Poll until the distinct offsets 0..count-1 of ``partition`` arrived."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.offsets(partition)
            if set(range(count)) <= set(got):
                return got
            if time.monotonic() > deadline:
                missing = sorted(set(range(count)) - set(got))
                raise AssertionError(f"partition {partition}: {len(missing)} offsets missing, first {missing[:10]}")
            time.sleep(0.02)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A node killed mid-request resets its connection: expected here, not worth a traceback."""


def check_signature(secret: str, header: str, body: bytes) -> bool:
    """``t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>``, within 5 minutes."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    if "t" not in fields or "v1" not in fields:
        return False
    mac = hmac.new(secret.encode(), fields["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(mac, fields["v1"]) and abs(time.time() - int(fields["t"])) < 300
