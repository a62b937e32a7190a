"""Which webhook targets the broker may connect to (server-side request forgery guard).

A push subscription makes the broker send HTTP requests to a URL an API
client chose. Left open, that turns every broker into a proxy towards what
only the broker can reach: loopback admin ports, the cluster's private
network, the cloud metadata service at 169.254.169.254. So by default a
target must resolve only to *public unicast* addresses; an operator widens
that with ``TIDELOG_WEBHOOK_ALLOWED_NETWORKS`` (CIDRs, e.g. ``10.0.0.0/8``)
and may narrow the host names with ``TIDELOG_WEBHOOK_ALLOWED_HOSTS``
(``hooks.example.com``, ``*.example.com``).

The check runs twice: when the subscription is created (clear 400 for the
client) and before every delivery, on the addresses the name resolves to at
that moment. The delivery then connects to the exact address it checked
(see ``sender.py``), so a name that resolved to a public address at create
time and to 127.0.0.1 later (DNS rebinding) is refused, not followed.
Every address a name resolves to must be permitted, so a name with one
public and one private record cannot smuggle the private one in.

IPv6 forms that embed an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``,
IPv4-compatible, 6to4, Teredo, NAT64 ``64:ff9b::/96``) are judged by the
IPv4 address they carry, since that is where the packets go.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_COMPAT = ipaddress.IPv6Network("::/96")


class TargetRefused(Exception):
    """The URL is malformed, unresolvable or not a permitted target; ``str()`` says why."""

    def __init__(self, detail: str, *, policy: bool) -> None:
        super().__init__(detail)
        self.policy = policy
        """True: well-formed but refused by the address policy; False: malformed or unresolvable."""


def parse_networks(raw: str) -> tuple[IPNetwork, ...]:
    """Comma-separated CIDRs (a bare address is a /32 or /128); ValueError on a bad one."""
    out = []
    for part in raw.split(","):
        part = part.strip()
        if part:
            out.append(ipaddress.ip_network(part, strict=False))
    return tuple(out)


def parse_hosts(raw: str) -> tuple[str, ...]:
    return tuple(h.strip().lower().rstrip(".") for h in raw.split(",") if h.strip())


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address routes to, if it embeds one."""
    if isinstance(ip, ipaddress.IPv4Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64 or (ip in _COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public_unicast(ip: IPAddress) -> bool:
    """Globally routable unicast: not loopback, private, link-local, shared (CGNAT),
    multicast, reserved, unspecified or documentation space (``is_global`` covers
    the IANA special-purpose registries)."""
    v4 = embedded_ipv4(ip)
    if v4 is not None:
        return is_public_unicast(v4)
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True, slots=True)
class TargetPolicy:
    allowed_networks: tuple[IPNetwork, ...] = ()
    allowed_hosts: tuple[str, ...] = ()

    def address_allowed(self, ip: IPAddress) -> bool:
        """Public unicast, or inside an operator-allowed network (checked on the
        address and on any IPv4 address it embeds)."""
        candidates: list[IPAddress] = [ip]
        v4 = embedded_ipv4(ip)
        if v4 is not None:
            candidates.append(v4)
        for c in candidates:
            if any(c.version == n.version and c in n for n in self.allowed_networks):
                return True
        return is_public_unicast(ip)

    def host_allowed(self, host: str) -> bool:
        if not self.allowed_hosts:
            return True
        h = host.lower().rstrip(".")
        for pattern in self.allowed_hosts:
            if pattern.startswith("*."):
                if h.endswith(pattern[1:]) and len(h) > len(pattern) - 1:
                    return True
            elif h == pattern:
                return True
        return False

    def check_addresses(self, host: str, addresses: Iterable[IPAddress]) -> None:
        """TargetRefused unless every address is permitted (and there is one)."""
        addrs = list(addresses)
        if not addrs:
            raise TargetRefused(f"{host!r} resolves to no address", policy=False)
        for ip in addrs:
            if not self.address_allowed(ip):
                raise TargetRefused(
                    f"{host!r} resolves to {ip}, which is not a public unicast address and is not "
                    "in TIDELOG_WEBHOOK_ALLOWED_NETWORKS",
                    policy=True,
                )


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed target URL: where to connect and what to say in Host / SNI."""

    url: SplitResult
    host: str
    port: int

    @property
    def scheme(self) -> str:
        return self.url.scheme


def parse_target(url: str, policy: TargetPolicy) -> Target:
    """Syntax and host-name checks that need no DNS."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise TargetRefused(f"invalid URL {url!r}: {e}", policy=False) from None
    if parts.scheme not in ("http", "https"):
        raise TargetRefused(f"URL scheme must be http or https, not {parts.scheme!r}", policy=False)
    if not parts.hostname:
        raise TargetRefused(f"URL {url!r} has no host", policy=False)
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("credentials in the URL are not supported; use headers", policy=False)
    if parts.fragment:
        raise TargetRefused("a URL fragment is never sent; remove it", policy=False)
    host = parts.hostname
    if not policy.host_allowed(host):
        raise TargetRefused(f"host {host!r} is not in TIDELOG_WEBHOOK_ALLOWED_HOSTS", policy=True)
    return Target(parts, host, port or (443 if parts.scheme == "https" else 80))


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to for TCP (a literal resolves to itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise TargetRefused(f"cannot resolve {host!r}: {e}", policy=False) from None
    seen: dict[str, IPAddress] = {}
    for family, *_rest, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            addr = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
            seen.setdefault(addr, ipaddress.ip_address(addr))
    return list(seen.values())


async def check_target(url: str, policy: TargetPolicy) -> tuple[Target, Sequence[IPAddress]]:
    """Parse, resolve and check ``url``; the permitted addresses to connect to."""
    target = parse_target(url, policy)
    addrs = await resolve(target.host, target.port)
    policy.check_addresses(target.host, addrs)
    return target, addrs
