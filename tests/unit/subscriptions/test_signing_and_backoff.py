"""Outgoing request signatures and retry backoff."""

from __future__ import annotations

import hashlib
import hmac
import random

from app.subscriptions.signing import sign, verify
from app.subscriptions.worker import backoff_s


def test_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    body = b'{"records":[]}'
    header = sign("k" * 20, body, 1_700_000_000)
    t, v1 = header.split(",")
    assert t == "t=1700000000"
    expected = hmac.new(b"k" * 20, b"1700000000." + body, hashlib.sha256).hexdigest()
    assert v1 == f"v1={expected}"


def test_verify_accepts_the_signature_and_refuses_tampering_other_keys_and_old_timestamps() -> None:
    body = b'{"a":1}'
    h = sign("secret-secret-1234", body, 1_000)
    assert verify("secret-secret-1234", h, body, now_s=1_010)
    assert not verify("secret-secret-1234", h, b'{"a":2}', now_s=1_010)
    assert not verify("another-secret-123", h, body, now_s=1_010)
    assert not verify("secret-secret-1234", h, body, tolerance_s=300, now_s=1_400)
    assert not verify("secret-secret-1234", "garbage", body, now_s=1_000)
    # A receiver in a key rotation may get two v1 values: any match verifies.
    both = h + ",v1=" + "0" * 64
    assert verify("secret-secret-1234", both, body, now_s=1_000)


def test_backoff_is_full_jitter_under_an_exponential_ceiling_and_a_cap() -> None:
    rng = random.Random(7)
    for attempt in range(1, 40):
        ceiling = min(60_000, 100 * 2 ** (attempt - 1)) / 1000
        samples = [backoff_s(attempt, 100, 60_000, rng) for _ in range(200)]
        assert all(0 <= s <= ceiling for s in samples)
        assert max(samples) > ceiling * 0.8, "jitter should spread over the whole range"
