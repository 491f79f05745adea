"""The SSRF guard's rules: which URLs and addresses the service calls. `app/core/safe_http.py` applies them where
each connection is dialled; `resolve` checks a URL up front (when an endpoint is registered)."""

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}
DNS_TIMEOUT_SECONDS = 5.0
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
}
# IPv6 forms that carry an IPv4 address in their last 32 bits: judged by that address.
_V4_CARRIERS = {
    "::ffff:0:0/96": "an IPv4-mapped",
    "::/96": "an IPv4-compatible",
    "64:ff9b::/96": "a NAT64",
}


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


def check_syntax(url: str) -> None:
    """Refuse a URL that is not plain http(s) to a host, without credentials, of sane length."""
    _parse(url)


def refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address is refused (e.g. "a loopback address"), or None when it is public."""
    for net, reason in _REFUSED.items():
        if ip in ipaddress.ip_network(net):
            return reason
    for net, form in _V4_CARRIERS.items():
        if ip in ipaddress.ip_network(net):
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
            why = refusal(inner)
            return f"{form} form of {inner}, {why}" if why else None
    return None if ip.is_global else "a special-purpose (non-public) address"  # documentation, benchmarking, etc.


async def resolve(url: str, allow_private: bool) -> Target:
    """Resolve a URL's host once and check every address; the Target is pinned to the first one."""
    scheme, host, port = _parse(url)
    try:
        async with asyncio.timeout(DNS_TIMEOUT_SECONDS):
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, TimeoutError) as exc:
        raise UnsafeURL(f"{url} could not be resolved: no address was found for {host}") from exc
    addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    # One bad address refuses the URL: DNS answers can rotate, so picking a good one proves nothing.
    for address in addresses:
        why = None if allow_private else refusal(address)
        if why:
            raise UnsafeURL(f"{url} resolves to {address}, {why}; only public addresses are called ({ALLOW_HINT})")
    return Target(url=url, scheme=scheme, host=host, port=port, ip=str(addresses[0]))


def _parse(url: str) -> tuple[str, str, int]:
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeURL(f"the URL is {len(url)} characters long; at most {MAX_URL_LENGTH} are allowed")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise UnsafeURL(f"{url!r} contains spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
        # DNS, the Host header and SNI all want the ASCII (IDNA) form of an international name.
        host = (parts.hostname or "").encode("idna").decode("ascii")
    except (ValueError, UnicodeError) as exc:
        raise UnsafeURL(f"{url} is not a valid URL ({exc})") from exc
    if parts.scheme not in DEFAULT_PORTS:
        raise UnsafeURL(f"{url} is not an http or https URL")
    if not host:
        raise UnsafeURL(f"{url} has no host")
    if "@" in parts.netloc:
        raise UnsafeURL(f"{url} carries credentials (user:password@); put them in headers instead")
    return parts.scheme, host, DEFAULT_PORTS[parts.scheme] if port is None else port
