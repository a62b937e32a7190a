"""Node-to-node HTTP: one keep-alive client, the cluster secret, problem decoding."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from app.client import TidelogError, problem_of

INTERNAL_AUTH_HEADER = "authorization"


class PeerError(TidelogError):
    """A peer answered with a problem document, or could not be reached (status 0)."""


class Peers:
    def __init__(self, secret: str, timeout_s: float = 10.0) -> None:
        self.secret = secret
        # One pool for all peers: keep-alive per host is handled by httpx.
        self.http = httpx.AsyncClient(
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )

    def auth_headers(self) -> dict[str, str]:
        return {INTERNAL_AUTH_HEADER: f"Bearer {self.secret}"}

    async def call(
        self, url: str, body: dict[str, Any] | None = None, *, method: str = "POST",
        params: dict[str, Any] | None = None, timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """JSON call to an internal endpoint; raises PeerError on a problem or I/O error."""
        try:
            resp = await self.http.request(
                method, url, content=orjson.dumps(body) if body is not None else None,
                params=params, headers={**self.auth_headers(), "content-type": "application/json"},
                timeout=timeout_s if timeout_s is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.HTTPError as e:
            raise PeerError(0, "UNAVAILABLE", f"{url}: {e!r}", {}) from None
        problem = problem_of(resp)
        if problem is not None:
            raise PeerError(problem.status, problem.code, problem.detail, problem.body)
        data = orjson.loads(resp.content) if resp.content else {}
        return data if isinstance(data, dict) else {}

    async def close(self) -> None:
        await self.http.aclose()
