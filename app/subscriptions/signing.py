"""Signatures on outgoing webhook requests.

``Tidelog-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>``.
The timestamp is inside the MAC so a receiver can refuse replays older than
its tolerance; every attempt is signed afresh, so a retry an hour later
still carries a current timestamp. ``v1`` names the scheme, so a future
scheme can be sent alongside during a migration. A receiver compares with a
constant-time comparison (``verify`` below is the reference).
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "Tidelog-Signature"


def sign(secret: str, body: bytes, timestamp_s: int) -> str:
    """The ``Tidelog-Signature`` header value for ``body`` sent at ``timestamp_s``."""
    mac = hmac.new(secret.encode(), b"%d." % timestamp_s + body, hashlib.sha256).hexdigest()
    return f"t={timestamp_s},v1={mac}"


def verify(secret: str, header: str, body: bytes, tolerance_s: int = 300, now_s: int | None = None) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` within ``tolerance_s`` of now."""
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        k, _, v = part.strip().partition("=")
        fields.setdefault(k, []).append(v)
    try:
        t = int(fields["t"][0])
    except (KeyError, ValueError):
        return False
    now = int(time.time()) if now_s is None else now_s
    if abs(now - t) > tolerance_s:
        return False
    expected = sign(secret, body, t).split("v1=", 1)[1]
    return any(hmac.compare_digest(expected, v) for v in fields.get("v1", []))
