"""The SSRF guard's rules: which URLs and addresses the service calls. `app/core/safe_http.py` applies them where
each connection is dialled; `resolve` checks a URL up front (when an endpoint is registered)."""

import asyncio
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import aiodns
import pycares

from app.core.masking import mask_urls

MAX_URL_LENGTH = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}
DNS_TIMEOUT_SECONDS = 5.0  # one lookup, c-ares and the operating system's resolver after it together
DNS_TRY_SECONDS, DNS_TRIES = 1.0, 2  # c-ares: each server's first wait (doubled on the next try), and tries
ALLOW_HINT = "set WEBHOOK_ALLOW_PRIVATE_NETWORKS=true for local development"

_REFUSED = {
    "0.0.0.0/8": "an unspecified ('this network') address",
    "127.0.0.0/8": "a loopback address",
    "10.0.0.0/8": "a private address",
    "172.16.0.0/12": "a private address",
    "192.168.0.0/16": "a private address",
    "169.254.0.0/16": "a link-local address",
    "100.64.0.0/10": "a carrier-grade NAT address",
    "224.0.0.0/4": "a multicast address",
    "240.0.0.0/4": "a reserved address",
    "::/128": "an unspecified address",
    "::1/128": "a loopback address",
    "fe80::/10": "a link-local address",
    "fec0::/10": "a site-local address",
    "fc00::/7": "a private (unique local) address",
    "ff00::/8": "a multicast address",
    "2002::/16": "a 6to4 address",
    "2001::/32": "a Teredo address",
    "64:ff9b:1::/48": "a local-use NAT64 address",
    "3fff::/20": "a documentation address",
}
# IPv6 forms that carry an IPv4 address in their last 32 bits: judged by that address. (6to4 and Teredo carry one
# elsewhere, and are refused whatever it is, above.)
_V4_CARRIERS = {
    "::ffff:0:0/96": "an IPv4-mapped",
    "::ffff:0:0:0/96": "an IPv4-translated",
    "::/96": "an IPv4-compatible",
    "64:ff9b::/96": "a NAT64",
}


Address = ipaddress.IPv4Address | ipaddress.IPv6Address
# What inet_aton (and so getaddrinfo and every browser) reads as an IPv4 address: one to four dot-separated numbers,
# each decimal, octal (leading 0) or hex (0x), the last filling the remaining bytes (127.1, 0x7f.1, 2130706433).
_NUMERIC_HOST = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}\.?", re.IGNORECASE)


class UnsafeURL(ValueError):
    """A URL the service will not call; the message says why in a sentence."""


class TooLarge(ValueError):
    """A fetched body is longer than the caller allows."""


@dataclass(frozen=True)
class Target:
    """A URL whose addresses were checked; `ip` is the first of them."""

    url: str
    scheme: str
    host: str
    port: int
    ip: str


@dataclass(frozen=True)
class Response:
    """What a POST answered: its status, the start of its body and how long it took."""

    status_code: int
    body: str
    duration_ms: float
    retry_after: str | None = None


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> tuple[list[str], float | None]:
        """The host's addresses and their TTL in seconds (None when unknown); OSError when there are none."""
        ...


class SystemResolver:
    """The operating system's resolver (getaddrinfo), which reports no TTL."""

    async def resolve(self, host: str, port: int) -> tuple[list[str], float | None]:
        async with asyncio.timeout(DNS_TIMEOUT_SECONDS):
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(str(info[4][0]) for info in infos)), None


class TtlResolver:
    """DNS through c-ares (aiodns), which reports each answer's TTL, the hosts file included (whose answers have a
    TTL of 0). Whatever c-ares cannot answer, a name it does not find included (one only an NSS module knows, say),
    goes to the operating system's resolver, whose answer has no TTL; both share one deadline."""

    def __init__(self, nameservers: list[str] | None = None, fallback: Resolver | None = None) -> None:
        self._nameservers = nameservers
        self._fallback = fallback or SystemResolver()
        self._dns: aiodns.DNSResolver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def resolve(self, host: str, port: int) -> tuple[list[str], float | None]:
        async with asyncio.timeout(DNS_TIMEOUT_SECONDS):
            try:
                answer = await self._channel().getaddrinfo(host, port=port, type=socket.SOCK_STREAM)
            except (aiodns.error.DNSError, pycares.AresError, OSError):
                return await self._fallback.resolve(host, port)
        addresses = list(dict.fromkeys(_text(node.addr[0]) for node in answer.nodes))
        if not addresses:
            raise OSError(f"no address was found for {host}")
        # A CNAME's TTL bounds the answer as much as its addresses' do; a TTL of 0 is kept for the cache's least.
        return addresses, float(min([node.ttl for node in answer.nodes] + [cname.ttl for cname in answer.cnames]))

    def _channel(self) -> aiodns.DNSResolver:
        """c-ares for the running loop (a channel belongs to the loop it was made in), made on first use."""
        loop = asyncio.get_running_loop()
        if self._dns is None or self._loop is not loop:
            self._dns, self._loop = None, loop
            self._dns = aiodns.DNSResolver(self._nameservers, loop=loop, timeout=DNS_TRY_SECONDS, tries=DNS_TRIES)
        return self._dns

    async def close(self) -> None:
        dns, self._dns = self._dns, None
        if dns is not None and self._loop is asyncio.get_running_loop():
            await dns.close()


def _text(address: bytes | str) -> str:
    return address.decode() if isinstance(address, bytes) else address


def literal(host: str) -> Address | None:
    """The address a host names by itself, in any form the resolver would read as one; None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        pass
    if not _NUMERIC_HOST.fullmatch(host):
        return None
    parts = [_number(part) for part in host.removesuffix(".").split(".")]
    if any(part is None for part in parts):
        return None  # e.g. 08.1: not a number, so a name (which DNS will not find)
    *head, last = [part for part in parts if part is not None]
    if any(part > 0xFF for part in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    value = last
    for index, part in enumerate(head):
        value |= part << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _number(part: str) -> int | None:
    base = 16 if part[:2].lower() == "0x" else 8 if len(part) > 1 and part[0] == "0" else 10
    digits = part[2:] if base == 16 else part
    try:
        return int(digits or "0", base)
    except ValueError:
        return None


def refused(host: str, address: Address, why: str, looked_up: bool) -> UnsafeURL:
    """The refusal of `host`: which address it is (or resolves to) and why that address is not called."""
    if looked_up:
        subject = f"{host} resolves to {address},"
    elif host.strip("[]") == str(address):
        subject = f"{host} is"
    else:  # 0x7f.1, 2130706433, ::ffff:7f00:1: say which address that spelling is
        subject = f"{host} is {address},"
    return UnsafeURL(f"{subject} {why}; only public addresses are called ({ALLOW_HINT})")


def check_syntax(url: str) -> None:
    """Refuse a URL that is not plain http(s) to a host, without credentials, of sane length."""
    _parse(url)


def destination(url: str) -> tuple[str, str, int]:
    """The URL as it is called, with its host (ASCII) and port, once its syntax is checked: an IPv4 address in
    another spelling (0177.0.0.1, 127.1, 2130706433) is written the usual way, as browsers do, since HTTP clients
    disagree on the others."""
    _, host, port = _parse(url)
    address = literal(host)
    if address is None or address.version != 4 or host == str(address):
        return url, host, port
    parts = urlsplit(url)
    shown = f":{parts.port}" if parts.port is not None else ""
    return parts._replace(netloc=f"{address}{shown}").geturl(), str(address), port


def _networks(table: dict[str, str]) -> list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]]:
    """A table's networks parsed once: parsing them on every check cost about 100 microseconds a dial."""
    return [(ipaddress.ip_network(net), text) for net, text in table.items()]


_REFUSED_NETWORKS = _networks(_REFUSED)
_V4_CARRIER_NETWORKS = _networks(_V4_CARRIERS)
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")  # the only IPv6 space IANA hands out for public addresses


def refusal(ip: Address) -> str | None:
    """Why an address is refused (e.g. "a loopback address"), or None when it is public."""
    for net, reason in _REFUSED_NETWORKS:
        if ip in net:
            return reason
    for net, form in _V4_CARRIER_NETWORKS:
        if ip in net:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
            why = refusal(inner)
            return f"{form} form of {inner}, {why}" if why else None
    if ip.version == 6 and ip not in _GLOBAL_UNICAST:
        return "a reserved (unallocated) IPv6 address"  # outside 2000::/3, nothing is public
    return None if ip.is_global else "a special-purpose (non-public) address"  # documentation, benchmarking, etc.


async def resolve(url: str, allow_private: bool, resolver: Resolver | None = None) -> Target:
    """Resolve a URL's host once and check every address; the Target is pinned to the first one. An address
    written in the URL (in any form) is judged as it is, without a lookup."""
    scheme, host, port = _parse(url)
    address = literal(host)
    if address is not None:
        addresses = [address]
    else:
        addresses = await _lookup(url, host, port, resolver or SystemResolver())
    # One bad address refuses the URL: DNS answers can rotate, so picking a good one proves nothing.
    for address in addresses:
        why = None if allow_private else refusal(address)
        if why:
            raise refused(host, address, why, looked_up=literal(host) is None)
    return Target(url=url, scheme=scheme, host=host, port=port, ip=str(addresses[0]))


async def _lookup(url: str, host: str, port: int, resolver: Resolver) -> list[Address]:
    try:
        answer, _ = await resolver.resolve(host, port)
        if not answer:
            raise OSError(f"no address was found for {host}")
        return [ipaddress.ip_address(address) for address in answer]
    except (OSError, TimeoutError, ValueError) as exc:
        raise UnsafeURL(f"{mask_urls(url)} could not be resolved: no address was found for {host}") from exc


def _parse(url: str) -> tuple[str, str, int]:
    """The URL's scheme, host and port; UnsafeURL when it is not one to call (the sentence shows the URL without
    its credentials)."""
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeURL(f"the URL is {len(url)} characters long; at most {MAX_URL_LENGTH} are allowed")
    shown = mask_urls(url)
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise UnsafeURL(f"{shown!r} contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
        # DNS, the Host header and SNI all want the ASCII (IDNA) form of an international name.
        host = (parts.hostname or "").encode("idna").decode("ascii")
    except (ValueError, UnicodeError) as exc:
        raise UnsafeURL(f"{shown} is not a valid URL ({mask_urls(str(exc))})") from exc
    if parts.scheme not in DEFAULT_PORTS:
        raise UnsafeURL(f"{shown} is not an http or https URL")
    if not host:
        raise UnsafeURL(f"{shown} has no host")
    if "@" in parts.netloc:
        raise UnsafeURL(f"{shown} carries credentials (user:password@); put them in headers instead")
    return parts.scheme, host, DEFAULT_PORTS[parts.scheme] if port is None else port
