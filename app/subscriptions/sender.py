"""One HTTP POST to a subscriber, connected to an address the SSRF policy checked.

The host name is resolved and checked here, right before the request, and
the request is then sent to that *address* (the URL's host replaced by the
IP; ``Host`` and, for https, TLS SNI and certificate verification keep the
original name through httpx's ``sni_hostname`` extension). Nothing resolves
the name a second time between the check and the connect, which is what
makes DNS rebinding useless. Redirects are not followed (a 3xx is a failed
attempt: following it would reach an unchecked address) and proxy
environment variables are ignored for the same reason.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import httpx

from app.subscriptions.ssrf import TargetPolicy, TargetRefused, check_target

ERROR_BODY_BYTES = 200
"""How much of a failed answer's body goes into ``last_error``."""
ANSWER_BYTES_MAX = 64 * 1024
"""Answers are read to the end (keep-alive) up to this size; past it the connection is dropped."""


@dataclass(frozen=True, slots=True)
class Outcome:
    ok: bool
    status: int | None
    error: str | None
    """Why the attempt failed (None on success), short enough to store in metadata."""


class Sender:
    def __init__(self, policy: TargetPolicy) -> None:
        self.policy = policy
        self.http = httpx.AsyncClient(
            trust_env=False,
            follow_redirects=False,
            limits=httpx.Limits(max_connections=500, max_keepalive_connections=100),
        )

    async def close(self) -> None:
        await self.http.aclose()

    async def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> Outcome:
        try:
            target, addrs = await check_target(url, self.policy)
        except TargetRefused as e:
            return Outcome(False, None, f"target refused: {e}")
        ip = addrs[0]
        host = f"[{ip}]" if ip.version == 6 else str(ip)
        netloc = host if target.url.port is None else f"{host}:{target.url.port}"
        pinned = target.url._replace(netloc=netloc).geturl()
        extensions: dict[str, str] = {}
        if target.scheme == "https" and not _is_ip(target.host):
            extensions["sni_hostname"] = target.host
        try:
            async with self.http.stream(
                "POST", pinned, content=body, headers={**headers, "Host": target.url.netloc},
                timeout=timeout_s, extensions=extensions,
            ) as resp:
                # Read the (small) answer to its end so the connection goes back to the pool:
                # an unread body closes it, and a new TCP connection per batch halves throughput.
                # A large answer is cut off and its connection dropped instead.
                snippet = b""
                async for chunk in resp.aiter_raw():
                    snippet += chunk
                    if len(snippet) > ANSWER_BYTES_MAX:
                        break
                if 200 <= resp.status_code < 300:
                    return Outcome(True, resp.status_code, None)
                text = snippet[:ERROR_BODY_BYTES].decode("utf-8", "replace").strip()
                return Outcome(False, resp.status_code, f"HTTP {resp.status_code}" + (f": {text}" if text else ""))
        except httpx.TimeoutException:
            return Outcome(False, None, f"timed out after {timeout_s:g} s")
        except httpx.HTTPError as e:
            return Outcome(False, None, f"{type(e).__name__}: {e}"[:300])


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
