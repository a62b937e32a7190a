"""Webhook signature schemes: verify what senders sign, and sign like them (tests, benches).

Both schemes are HMAC-SHA256 with a shared secret over the *raw* body, so a
hook must verify before anything parses or re-encodes the body.

* ``github``: header ``X-Hub-Signature-256: sha256=<hex>``, the HMAC of the
  body (GitHub's documented delivery header).
* ``stripe``: header ``Stripe-Signature: t=<unix s>,v1=<hex>[,v1=<hex>...]``,
  the HMAC of ``"<t>.<body>"``; the timestamp must be within a tolerance of
  now, which bounds how long a captured request can be replayed.

Several secrets may be configured at once, so a secret can be rotated without
refusing deliveries signed with the old one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

from app.errors import ApiError

GITHUB_HEADER = "x-hub-signature-256"
STRIPE_HEADER = "stripe-signature"


def hmac_hex(secret: str, payload: bytes) -> str:
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def github_signature(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value a GitHub sender would put on ``body``."""
    return "sha256=" + hmac_hex(secret, body)


def stripe_signature(secret: str, body: bytes, timestamp_s: int) -> str:
    """The ``Stripe-Signature`` value a Stripe sender would put on ``body`` at ``timestamp_s``."""
    return f"t={timestamp_s},v1={hmac_hex(secret, str(timestamp_s).encode() + b'.' + body)}"


def _refuse(code: str, detail: str) -> ApiError:
    return ApiError(code, detail, status=401)


def _matches(expected_hex: Sequence[str], given: str) -> bool:
    # compare_digest on every candidate: no early exit that would time which secret matched.
    ok = False
    for e in expected_hex:
        ok |= hmac.compare_digest(e, given)
    return ok


def verify_github(headers: Mapping[str, str], body: bytes, secrets: Sequence[str]) -> None:
    """Raise 401 ``SIGNATURE_MISSING`` / ``SIGNATURE_INVALID`` unless a secret signed ``body``."""
    value = headers.get(GITHUB_HEADER)
    if not value:
        raise _refuse("SIGNATURE_MISSING", "missing X-Hub-Signature-256 header")
    scheme, _, digest = value.strip().partition("=")
    if scheme != "sha256" or not digest:
        raise _refuse("SIGNATURE_INVALID", "X-Hub-Signature-256 must be 'sha256=<hex>'")
    if not _matches([hmac_hex(s, body) for s in secrets], digest.lower()):
        raise _refuse("SIGNATURE_INVALID", "X-Hub-Signature-256 does not match the body")


def verify_stripe(
    headers: Mapping[str, str], body: bytes, secrets: Sequence[str], tolerance_s: int, now_s: int
) -> None:
    """Raise 401 unless a ``v1`` signature over ``"<t>.<body>"`` matches and ``t`` is recent.

    ``SIGNATURE_EXPIRED`` when ``t`` is further than ``tolerance_s`` from now
    (either direction: a clock far ahead is as suspect as a replay).
    """
    value = headers.get(STRIPE_HEADER)
    if not value:
        raise _refuse("SIGNATURE_MISSING", "missing Stripe-Signature header")
    ts: int | None = None
    given: list[str] = []
    for part in value.split(","):
        k, _, v = part.strip().partition("=")
        if k == "t":
            try:
                ts = int(v)
            except ValueError:
                raise _refuse("SIGNATURE_INVALID", "Stripe-Signature t= is not an integer") from None
        elif k == "v1" and v:
            given.append(v.lower())
    if ts is None or not given:
        raise _refuse("SIGNATURE_INVALID", "Stripe-Signature needs t=<unix seconds> and v1=<hex>")
    if abs(now_s - ts) > tolerance_s:
        raise _refuse(
            "SIGNATURE_EXPIRED",
            f"Stripe-Signature timestamp {ts} is {abs(now_s - ts)} s from now (tolerance {tolerance_s} s)",
        )
    signed = str(ts).encode() + b"." + body
    expected = [hmac_hex(s, signed) for s in secrets]
    if not any(_matches(expected, g) for g in given):
        raise _refuse("SIGNATURE_INVALID", "no v1 signature in Stripe-Signature matches the body")
