"""Signature checks and the delivery → record mapping, without a server."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.errors import ApiError
from app.hooks.config import HookConfig
from app.hooks.ingest import build_delivery, resolve_pointer
from app.hooks.signatures import github_signature, stripe_signature, verify_github, verify_stripe


def test_github_signature_is_the_documented_hmac_of_the_body() -> None:
    # Independent computation of the header GitHub documents: sha256=HMAC-SHA256(secret, body).
    body = b"Hello, World!"
    want = "sha256=" + hmac.new(b"It's a Secret to Everybody", body, hashlib.sha256).hexdigest()
    assert github_signature("It's a Secret to Everybody", body) == want
    verify_github({"x-hub-signature-256": want}, body, ["It's a Secret to Everybody"])


@given(st.binary(max_size=200), st.binary(min_size=1, max_size=200))
def test_any_change_to_a_github_signed_body_is_refused(body: bytes, suffix: bytes) -> None:
    sig = github_signature("k", body)
    with pytest.raises(ApiError) as e:
        verify_github({"x-hub-signature-256": sig}, body + suffix, ["k"])
    assert (e.value.status, e.value.code) == (401, "SIGNATURE_INVALID")


@pytest.mark.parametrize(("skew_s", "code"), [(0, None), (299, None), (-299, None), (301, "SIGNATURE_EXPIRED"),
                                              (-301, "SIGNATURE_EXPIRED")])
def test_stripe_tolerance_applies_both_ways(skew_s: int, code: str | None) -> None:
    now = 1_700_000_000
    header = {"stripe-signature": stripe_signature("whsec", b"{}", now + skew_s)}
    if code is None:
        verify_stripe(header, b"{}", ["whsec"], 300, now)
    else:
        with pytest.raises(ApiError) as e:
            verify_stripe(header, b"{}", ["whsec"], 300, now)
        assert e.value.code == code


@pytest.mark.parametrize(
    ("doc", "pointer", "want"),
    [
        ({"a": {"b": [1, {"c": 2}]}}, "/a/b/1/c", 2),
        ({"a/b": 1, "m~n": 2}, "/a~1b", 1),
        ({"a/b": 1, "m~n": 2}, "/m~0n", 2),
        ({"a": [1]}, "/a/5", None),
        ({"a": [1]}, "/a/x", None),
        ({"a": 1}, "/a/b", None),
        ({"a": 1}, "", {"a": 1}),
    ],
)
def test_json_pointer_follows_rfc_6901(doc: object, pointer: str, want: object) -> None:
    assert resolve_pointer(doc, pointer) == want


def test_stripe_defaults_take_the_event_id_from_the_body_as_delivery_id_and_key() -> None:
    cfg = HookConfig.model_validate({"signature": {"scheme": "stripe", "secrets": ["x"]}})
    d = build_delivery(cfg, {"content-type": "application/json"}, b'{"id": "evt_9", "n": 1.5}')
    assert (d.delivery_id, d.key) == ("evt_9", "evt_9")
    assert d.record["value"] == {"id": "evt_9", "n": 1.5}
    assert d.record["headers"] == {"content-type": "application/json", "tidelog-body": "json",
                                   "tidelog-delivery-id": "evt_9"}


def test_parse_json_false_keeps_the_exact_text() -> None:
    cfg = HookConfig.model_validate({"parse_json": False})
    body = b'{ "spacing" :  "kept" }'
    d = build_delivery(cfg, {"content-type": "application/json"}, body)
    assert d.record["value"] == body.decode() and d.record["headers"]["tidelog-body"] == "text"
