"""Pooled HTTP through the SSRF guard: every connection's addresses are checked where it is dialled.

One aiohttp session per worker (its HTTP parser is compiled: a POST costs a fraction of a pure-Python client's
CPU). Its pool is keyed by (scheme, host name, port), so two names never share a connection, and TLS is
negotiated for the URL's host name (SNI and certificate for the name, not the address). A new connection's
name is resolved through the guard (`GuardedResolver`), which refuses the name when any address of its answer is
forbidden; a host written as an address is judged before the request. The socket each dial opens is checked
once more for the very address it connects to, so no connection reaches an address the policy refuses.

Failures come back as httpx's exception types (ConnectError, ConnectTimeout, ReadTimeout, ReadError,
RemoteProtocolError, HTTPStatusError): the vocabulary the handlers and the webhook worker already speak.
"""

import ipaddress
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp
import certifi
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult

from app.core import ssrf
from app.core.dns_cache import DNS_DEFAULT_SECONDS, DNS_MAX_SECONDS, DNS_MIN_SECONDS, DnsCache
from app.core.masking import mask_urls
from app.core.ssrf import Address, Resolver, TtlResolver

Policy = Callable[[Address], str | None]  # why an address is refused, or None
Dialled = Callable[[str, int], None]  # told of each address and port a socket is opened for

CONNECT_TIMEOUT_SECONDS = 5.0


def address_policy(allow_private: bool) -> Policy:
    """The service's rule: public addresses only, unless private networks are allowed."""
    return (lambda _: None) if allow_private else ssrf.refusal


@dataclass
class Guard:
    """Which addresses a host may be dialled at: all of its answer, or none when one is forbidden."""

    dns: DnsCache
    policy: Policy
    dialled: Dialled | None = None

    async def checked_addresses(self, host: str, port: int) -> list[Address]:
        """The addresses to dial for `host`, checked on every dial (cached answers too: the cache is not trusted)."""
        literal = self.checked_literal(host)
        if literal is not None:
            return [literal]
        try:
            answer = [ipaddress.ip_address(address) for address in await self.dns.resolve(host, port)]
        except (OSError, TimeoutError, ValueError) as exc:
            raise ssrf.UnsafeURL(f"{host} could not be resolved: no address was found for it") from exc
        # One bad address refuses the host: picking a good one out of a rotating answer proves nothing.
        for address in answer:
            self._check(host, address, looked_up=True)
        return answer

    def checked_literal(self, host: str) -> Address | None:
        """The address a host names by itself (0x7f.1 and 2130706433 too: judged as the address they are, never
        looked up), once checked; None for a name."""
        literal = ssrf.literal(host)
        if literal is not None:
            self._check(host, literal, looked_up=False)
        return literal

    def socket_for(self, info: Any) -> socket.socket:
        """The socket a dial opens (aiohttp's socket factory), for an address checked here once more."""
        family, kind, proto, _, sockaddr = info
        address = ipaddress.ip_address(sockaddr[0])
        self._check(str(address), address, looked_up=False)
        if self.dialled is not None:
            self.dialled(str(address), int(sockaddr[1]))
        return socket.socket(family=family, type=kind, proto=proto)

    def _check(self, host: str, address: Address, looked_up: bool) -> None:
        why = self.policy(address)
        if why:
            raise ssrf.refused(host, address, why, looked_up)


class GuardedResolver(AbstractResolver):
    """aiohttp's resolver for every new connection to a named host: the guard's checked answer."""

    def __init__(self, guard: Guard) -> None:
        self._guard = guard

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_UNSPEC) -> list[ResolveResult]:
        return [
            {
                "hostname": host,
                "host": str(address),
                "port": port,
                "family": socket.AF_INET if address.version == 4 else socket.AF_INET6,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in await self._guard.checked_addresses(host, port)
        ]

    async def close(self) -> None:
        return None


@dataclass
class SafeClient:
    """One pooled session behind the guard, opened on its first request (inside the running loop) and again on
    the first one after `aclose`."""

    guard: Guard
    max_connections: int
    max_per_host: int
    keepalive_seconds: float
    tls: ssl.SSLContext | bool
    _session: aiohttp.ClientSession | None = field(default=None, init=False)

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self.max_connections,
                limit_per_host=self.max_per_host,
                keepalive_timeout=self.keepalive_seconds if self.keepalive_seconds > 0 else None,
                force_close=self.keepalive_seconds <= 0,
                resolver=GuardedResolver(self.guard),
                use_dns_cache=False,  # the guard's cache, checked on every dial
                ssl=self.tls,
                socket_factory=self.guard.socket_for,
            )
            # No proxies from the environment (one would be dialled instead of the checked address), no cookies
            # kept between endpoints, bodies read as they are on the wire (the caps count those bytes).
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                skip_auto_headers=("User-Agent",),
                headers={"User-Agent": "taskq-webhooks"},
            )
        return self._session

    async def aclose(self) -> None:
        """Close the pool and its connections; a later request opens a new pool (a worker started again)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()
        if isinstance(self.guard.dns.resolver, TtlResolver):
            await self.guard.dns.resolver.close()

    async def __aenter__(self) -> "SafeClient":
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def safe_client(
    allow_private: bool,
    *,
    max_connections: int = 100,
    keepalive_seconds: float = 30.0,
    max_per_host: int | None = None,
    resolver: Resolver | None = None,
    policy: Policy | None = None,
    dialled: Dialled | None = None,
    verify: ssl.SSLContext | bool = True,
    dns_min_seconds: float = DNS_MIN_SECONDS,
    dns_max_seconds: float = DNS_MAX_SECONDS,
    dns_default_seconds: float = DNS_DEFAULT_SECONDS,
) -> SafeClient:
    """A pooled client that checks each connection's addresses as it dials and never follows redirects: at most
    `max_connections` open, `max_per_host` per (scheme, host, port) (unbounded when None). `resolver` replaces
    the system's own; `dialled` is told of every socket opened (address, port)."""
    dns = DnsCache(resolver or TtlResolver(), dns_min_seconds, dns_max_seconds, dns_default_seconds)
    guard = Guard(dns, address_policy(allow_private) if policy is None else policy, dialled)
    tls: ssl.SSLContext | bool = verify
    if verify is True:
        tls = ssl.create_default_context(cafile=certifi.where())
    return SafeClient(guard, max_connections, max_per_host or 0, keepalive_seconds, tls)


async def post(
    client: SafeClient,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout_seconds: float,
    max_body: int = 4096,
) -> ssrf.Response:
    """POST, reading at most `max_body` bytes of the answer; redirects are not followed."""
    return await send(client, "POST", url, body, headers, timeout_seconds, max_body)


async def send(
    client: SafeClient,
    method: str,
    url: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout_seconds: float,
    max_body: int = 4096,
) -> ssrf.Response:
    """Any method, reading at most `max_body` bytes of the answer; redirects are not followed."""
    started = time.perf_counter()
    status, answer, data = await _exchange(client, method, url, body, headers, timeout_seconds, max_body)
    elapsed_ms = (time.perf_counter() - started) * 1000
    return ssrf.Response(status, data.decode("utf-8", "replace"), elapsed_ms, answer.get("retry-after"))


async def download(
    client: SafeClient, url: str, headers: dict[str, str], timeout_seconds: float, max_bytes: int
) -> tuple[bytes, str]:
    """GET a body and its content type; TooLarge past `max_bytes`, HTTPStatusError on a non-2xx answer."""
    status, answer, data = await _exchange(client, "GET", url, None, headers, timeout_seconds, max_bytes + 1)
    if not 200 <= status < 300:
        request = httpx.Request("GET", url)
        response = httpx.Response(status, headers=list(answer.items()), request=request)
        raise httpx.HTTPStatusError(f"{mask_urls(url)} answered {status}", request=request, response=response)
    if len(data) > max_bytes:
        raise ssrf.TooLarge(f"{mask_urls(url)} answered more than {max_bytes} bytes")
    return data, answer.get("content-type", "")


async def _exchange(
    client: SafeClient,
    method: str,
    url: str,
    content: bytes | None,
    headers: dict[str, str],
    timeout_seconds: float,
    limit: int,
) -> tuple[int, Mapping[str, str], bytes]:
    url, host, _ = ssrf.destination(url)
    client.guard.checked_literal(host)  # aiohttp dials an address without asking the resolver: judged here
    # Identity encoding: the cap counts bytes on the wire, so no decompression bomb gets past it. The whole
    # exchange is timed as one, so a server that answers a byte at a time is stopped too.
    sent_headers = {**headers, "Accept-Encoding": "identity"}
    timeout = aiohttp.ClientTimeout(total=timeout_seconds, sock_connect=min(CONNECT_TIMEOUT_SECONDS, timeout_seconds))
    try:
        async with client.session().request(
            method, url, data=content, headers=sent_headers, timeout=timeout, allow_redirects=False
        ) as response:
            data = bytearray()
            while len(data) < limit:
                chunk = await response.content.read(limit - len(data))
                if not chunk:
                    break
                data += chunk
            return response.status, response.headers, bytes(data)
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(f"{mask_urls(url)} took no connection within {CONNECT_TIMEOUT_SECONDS} s") from exc
    except TimeoutError as exc:
        raise httpx.ReadTimeout(f"{mask_urls(url)} did not answer in full within {timeout_seconds} s") from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc)) from exc
    except aiohttp.ClientResponseError as exc:
        raise httpx.RemoteProtocolError(f"{mask_urls(url)} answered something that is not HTTP: {exc.message}") from exc
    except aiohttp.ClientError as exc:
        raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
