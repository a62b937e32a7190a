"""The webhook target policy: what counts as a public unicast address, and what an operator opens."""

from __future__ import annotations

import ipaddress

import pytest

from app.subscriptions.ssrf import (
    TargetPolicy,
    TargetRefused,
    check_target,
    parse_hosts,
    parse_networks,
    parse_target,
)

DEFAULT = TargetPolicy()

REFUSED = [
    "127.0.0.1", "127.255.0.9", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
    "100.64.0.1", "0.0.0.0", "255.255.255.255", "224.0.0.251", "240.0.0.1", "192.0.2.1",
    "198.18.0.1", "::1", "::", "fe80::1", "fc00::1", "fd12:3456::1", "ff02::1", "2001:db8::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "64:ff9b::7f00:1",
    "2002:7f00:1::1", "::7f00:1", "2001:0:4136:e378:8000:63bf:80ff:fffe",
]
PUBLIC = ["1.1.1.1", "8.8.8.8", "93.184.215.14", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize("addr", REFUSED)
def test_special_purpose_addresses_are_refused_by_default(addr: str) -> None:
    assert not DEFAULT.address_allowed(ipaddress.ip_address(addr))


@pytest.mark.parametrize("addr", PUBLIC)
def test_public_unicast_addresses_are_allowed(addr: str) -> None:
    assert DEFAULT.address_allowed(ipaddress.ip_address(addr))


def test_allowed_networks_open_exactly_their_ranges_including_mapped_forms() -> None:
    p = TargetPolicy(allowed_networks=parse_networks("127.0.0.0/8, 10.1.0.0/16"))
    assert p.address_allowed(ipaddress.ip_address("127.0.0.1"))
    assert p.address_allowed(ipaddress.ip_address("::ffff:127.0.0.1"))
    assert p.address_allowed(ipaddress.ip_address("10.1.2.3"))
    assert not p.address_allowed(ipaddress.ip_address("10.2.0.1"))
    assert not p.address_allowed(ipaddress.ip_address("169.254.169.254"))
    assert not p.address_allowed(ipaddress.ip_address("::1"))


def test_a_name_with_one_refused_address_among_public_ones_is_refused() -> None:
    addrs = [ipaddress.ip_address("8.8.8.8"), ipaddress.ip_address("10.0.0.1")]
    with pytest.raises(TargetRefused) as e:
        DEFAULT.check_addresses("mixed.example", addrs)
    assert e.value.policy and "10.0.0.1" in str(e.value)


def test_bad_network_settings_are_errors() -> None:
    with pytest.raises(ValueError):
        parse_networks("10.0.0.0/33")
    with pytest.raises(ValueError):
        parse_networks("not-a-cidr")


def test_allowed_hosts_narrow_names_with_exact_and_wildcard_patterns() -> None:
    p = TargetPolicy(allowed_hosts=parse_hosts("hooks.example.com, *.corp.example."))
    assert p.host_allowed("HOOKS.example.com")
    assert p.host_allowed("a.b.corp.example")
    assert not p.host_allowed("corp.example")
    assert not p.host_allowed("evil-corp.example")
    assert not p.host_allowed("example.com")


@pytest.mark.parametrize("url", [
    "ftp://example.com/", "file:///etc/passwd", "gopher://x/", "http:///nohost", "http://u:p@example.com/",
    "http://example.com:99999/", "http://example.com/#frag", "example.com/path",
])
def test_malformed_or_non_http_urls_are_refused_without_dns(url: str) -> None:
    with pytest.raises(TargetRefused) as e:
        parse_target(url, DEFAULT)
    assert not e.value.policy


async def test_names_are_checked_on_what_they_resolve_to() -> None:
    with pytest.raises(TargetRefused) as e:
        await check_target("http://localhost:8080/x", DEFAULT)
    assert e.value.policy
    p = TargetPolicy(allowed_networks=parse_networks("127.0.0.0/8,::1/128"))
    target, addrs = await check_target("http://localhost:8080/x", p)
    assert target.port == 8080 and addrs and all(a.is_loopback for a in addrs)


async def test_decimal_and_short_ipv4_forms_resolve_to_the_address_they_mean() -> None:
    for url in ("http://2130706433/", "http://127.1/", "http://0x7f000001/"):
        with pytest.raises(TargetRefused):
            await check_target(url, DEFAULT)
