"""The SSRF guard: check a URL's addresses once, then talk only to the address that was checked."""

import asyncio
import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

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
    """A URL whose address was checked: requests go to `ip`, carrying the original host name."""

    url: str
    scheme: str
    host: str
    port: int
    ip: str

    @property
    def pinned_url(self) -> str:
        return urlsplit(self.url)._replace(netloc=self._netloc(self.ip), fragment="").geturl()

    @property
    def host_header(self) -> str:
        return self._netloc(self.host)

    def _netloc(self, host: str) -> str:
        host = f"[{host}]" if ":" in host else host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


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


async def post(
    client: httpx.AsyncClient,
    target: Target,
    body: bytes,
    headers: dict[str, str],
    timeout_seconds: float,
    max_body: int = 4096,
) -> Response:
    """POST to the checked address, reading at most `max_body` bytes of the answer; redirects are not followed."""
    return await send(client, "POST", target, body, headers, timeout_seconds, max_body)


async def send(
    client: httpx.AsyncClient,
    method: str,
    target: Target,
    body: bytes | None,
    headers: dict[str, str],
    timeout_seconds: float,
    max_body: int = 4096,
) -> Response:
    """Any method to the checked address, reading at most `max_body` bytes of the answer, no redirects."""
    started = time.perf_counter()
    response, data = await _exchange(client, method, target, body, headers, timeout_seconds, max_body)
    elapsed_ms = (time.perf_counter() - started) * 1000
    body_text = data.decode("utf-8", "replace")
    return Response(response.status_code, body_text, elapsed_ms, response.headers.get("retry-after"))


async def get(
    client: httpx.AsyncClient, target: Target, headers: dict[str, str], timeout_seconds: float, max_bytes: int
) -> bytes:
    """GET the body from the checked address; TooLarge past `max_bytes`, HTTPStatusError on a non-2xx answer."""
    body, _ = await download(client, target, headers, timeout_seconds, max_bytes)
    return body


async def download(
    client: httpx.AsyncClient, target: Target, headers: dict[str, str], timeout_seconds: float, max_bytes: int
) -> tuple[bytes, str]:
    """Like `get`, with the answer's content type."""
    response, data = await _exchange(client, "GET", target, None, headers, timeout_seconds, max_bytes + 1)
    response.raise_for_status()
    if len(data) > max_bytes:
        raise TooLarge(f"{target.url} answered more than {max_bytes} bytes")
    return data, response.headers.get("content-type", "")


async def _exchange(
    client: httpx.AsyncClient,
    method: str,
    target: Target,
    content: bytes | None,
    headers: dict[str, str],
    timeout_seconds: float,
    limit: int,
) -> tuple[httpx.Response, bytes]:
    # Identity encoding and raw reads: the cap counts bytes on the wire, so no decompression bomb gets past it.
    sent_headers = {**headers, "Host": target.host_header, "Accept-Encoding": "identity"}
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}  # TLS verifies the real name
    try:
        # httpx times each read; the outer deadline also stops a server that answers a byte at a time.
        async with (
            asyncio.timeout(timeout_seconds),
            client.stream(
                method,
                target.pinned_url,
                content=content,
                headers=sent_headers,
                timeout=httpx.Timeout(timeout_seconds, connect=min(5.0, timeout_seconds)),
                follow_redirects=False,
                extensions=extensions,
            ) as response,
        ):
            data = bytearray()
            async for chunk in response.aiter_raw():
                data += chunk[: limit - len(data)]
                if len(data) >= limit:
                    break
            return response, bytes(data)
    except TimeoutError as exc:
        raise httpx.ReadTimeout(f"{target.url} did not answer in full within {timeout_seconds} s") from exc


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
