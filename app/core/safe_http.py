"""Pooled HTTP through the SSRF guard: every connection's addresses are checked where it is dialled.

httpcore pools by origin (scheme, host, port) and negotiates TLS for the URL's host name, so a pooled connection
is always one whose address was checked for that very name, and two names never share one.
"""

import asyncio
import ipaddress
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx

from app.core import ssrf
from app.core.net_backend import AsyncioBackend
from app.core.ssrf import Address, Resolver, SystemResolver

Policy = Callable[[Address], str | None]  # why an address is refused, or None
Origin = tuple[str, str, int]

DNS_MIN_SECONDS = 1.0
DNS_MAX_SECONDS = 300.0
DNS_DEFAULT_SECONDS = 30.0
DNS_CACHE_ENTRIES = 1024
CONNECT_TIMEOUT_SECONDS = 5.0


@dataclass
class DnsCache:
    """Answers kept for their TTL clamped to [min, max] (`default_seconds` when unknown); failures are not kept."""

    resolver: Resolver
    min_seconds: float = DNS_MIN_SECONDS
    max_seconds: float = DNS_MAX_SECONDS
    default_seconds: float = DNS_DEFAULT_SECONDS
    clock: Callable[[], float] = time.monotonic
    max_entries: int = DNS_CACHE_ENTRIES
    _answers: dict[tuple[str, int], tuple[list[str], float]] = field(default_factory=dict, init=False)

    async def resolve(self, host: str, port: int) -> list[str]:
        """The host's addresses, from the cache while they are fresh."""
        key = (host, port)
        cached = self._answers.get(key)
        if cached is not None and cached[1] > self.clock():
            return cached[0]
        addresses, ttl = await self.resolver.resolve(host, port)
        if not addresses:
            raise OSError(f"no address was found for {host}")
        keep = min(max(self.default_seconds if ttl is None else ttl, self.min_seconds), self.max_seconds)
        if keep > 0:
            self._remember(key, addresses, self.clock() + keep)
        return addresses

    def _remember(self, key: tuple[str, int], addresses: list[str], until: float) -> None:
        self._answers.pop(key, None)
        if len(self._answers) >= self.max_entries:
            now = self.clock()
            self._answers = {k: v for k, v in self._answers.items() if v[1] > now}
        if len(self._answers) >= self.max_entries:
            del self._answers[next(iter(self._answers))]  # the oldest answer
        self._answers[key] = (addresses, until)


def address_policy(allow_private: bool) -> Policy:
    """The service's rule: public addresses only, unless private networks are allowed."""
    return (lambda _: None) if allow_private else ssrf.refusal


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Dials a host only when the policy allows every address of its answer, and then the first of them."""

    def __init__(self, dns: DnsCache, policy: Policy, backend: httpcore.AsyncNetworkBackend | None = None) -> None:
        self._dns = dns
        self._policy = policy
        self._backend = AsyncioBackend() if backend is None else backend

    # The dial options (timeout, local address, socket options) go through to the real backend unchanged.
    async def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return await self._backend.connect_tcp(await self.checked_address(host, port), port, *args, **kwargs)

    async def connect_unix_socket(self, path: str, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise ssrf.UnsafeURL(f"{path} is a local socket; only public addresses are called")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)

    async def checked_address(self, host: str, port: int) -> str:
        """The address to dial for `host`, checked on every dial (cached answers too: the cache is not trusted)."""
        literal = ssrf.literal(host)
        if literal is not None:  # 0x7f.1 and 2130706433 too: judged as the address they are, never looked up
            self._check(host, literal, looked_up=False)
            return str(literal)
        try:
            answer = [ipaddress.ip_address(address) for address in await self._dns.resolve(host, port)]
        except (OSError, TimeoutError, ValueError) as exc:
            raise ssrf.UnsafeURL(f"{host} could not be resolved: no address was found for it") from exc
        # One bad address refuses the host: picking a good one out of a rotating answer proves nothing.
        for address in answer:
            self._check(host, address, looked_up=True)
        return str(answer[0])

    def _check(self, host: str, address: Address, looked_up: bool) -> None:
        why = self._policy(address)
        if why:
            raise ssrf.refused(host, address, why, looked_up)


@dataclass
class _Gate:
    slots: asyncio.Semaphore
    users: int = 0  # holding or awaiting a slot


class OriginGates:
    """At most `limit` requests in flight per origin. A gate lives only while a request holds or awaits it, so the
    table never holds more origins than there are requests."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._gates: dict[Origin, _Gate] = {}

    def __len__(self) -> int:
        return len(self._gates)

    async def enter(self, origin: Origin) -> Callable[[], None]:
        """Wait for a slot of the origin; returns the (idempotent) release."""
        gate = self._gates.get(origin) or self._gates.setdefault(origin, _Gate(asyncio.Semaphore(self.limit)))
        gate.users += 1
        try:
            await gate.slots.acquire()
        except BaseException:
            self._leave(origin, gate)
            raise
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                gate.slots.release()
                self._leave(origin, gate)

        return release

    def _leave(self, origin: Origin, gate: _Gate) -> None:
        gate.users -= 1
        if gate.users == 0:
            del self._gates[origin]


class _Releasing(httpx.AsyncByteStream):
    """A response body that gives its origin's slot back when it is closed."""

    def __init__(self, stream: httpx.AsyncByteStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release = release

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            yield part

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._release()


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (its exception mapping included) over a pool that dials through the guard."""

    def __init__(
        self,
        backend: httpcore.AsyncNetworkBackend,
        limits: httpx.Limits,
        verify: ssl.SSLContext | bool,
        max_per_host: int | None,
    ) -> None:
        # httpx 0.28 takes no network backend, so the pool it would build is replaced by one that has ours.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=backend,
        )
        self.gates = None if max_per_host is None else OriginGates(max_per_host)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.gates is None:
            return await super().handle_async_request(request)
        url = request.url
        release = await self.gates.enter((url.scheme, url.host, url.port or ssrf.DEFAULT_PORTS[url.scheme]))
        try:
            response = await super().handle_async_request(request)
        except BaseException:
            release()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        stream = _Releasing(response.stream, release)
        return httpx.Response(
            response.status_code, headers=response.headers, stream=stream, extensions=response.extensions
        )


def safe_client(
    allow_private: bool,
    *,
    max_connections: int = 100,
    max_keepalive: int = 20,
    keepalive_seconds: float = 30.0,
    max_per_host: int | None = None,
    resolver: Resolver | None = None,
    policy: Policy | None = None,
    backend: httpcore.AsyncNetworkBackend | None = None,
    verify: ssl.SSLContext | bool = True,
    dns_min_seconds: float = DNS_MIN_SECONDS,
    dns_max_seconds: float = DNS_MAX_SECONDS,
    dns_default_seconds: float = DNS_DEFAULT_SECONDS,
) -> httpx.AsyncClient:
    """A pooled client that checks each connection's addresses as it dials, never follows redirects and ignores
    proxies from the environment (a proxy would be dialled instead of the checked address). `resolver` and
    `backend` (what dials a checked address) replace the system's own."""
    dns = DnsCache(resolver or SystemResolver(), dns_min_seconds, dns_max_seconds, dns_default_seconds)
    guarded = GuardedBackend(dns, address_policy(allow_private) if policy is None else policy, backend)
    limits = httpx.Limits(
        max_connections=max_connections,
        max_keepalive_connections=min(max_keepalive, max_connections),
        keepalive_expiry=keepalive_seconds,
    )
    transport = GuardedTransport(guarded, limits, verify, max_per_host)
    return httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False)


async def post(
    client: httpx.AsyncClient,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout_seconds: float,
    max_body: int = 4096,
) -> ssrf.Response:
    """POST, reading at most `max_body` bytes of the answer; redirects are not followed."""
    return await send(client, "POST", url, body, headers, timeout_seconds, max_body)


async def send(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    body: bytes | None,
    headers: dict[str, str],
    timeout_seconds: float,
    max_body: int = 4096,
) -> ssrf.Response:
    """Any method, reading at most `max_body` bytes of the answer; redirects are not followed."""
    started = time.perf_counter()
    response, data = await _exchange(client, method, url, body, headers, timeout_seconds, max_body)
    elapsed_ms = (time.perf_counter() - started) * 1000
    body_text = data.decode("utf-8", "replace")
    return ssrf.Response(response.status_code, body_text, elapsed_ms, response.headers.get("retry-after"))


async def download(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], timeout_seconds: float, max_bytes: int
) -> tuple[bytes, str]:
    """GET a body and its content type; TooLarge past `max_bytes`, HTTPStatusError on a non-2xx answer."""
    response, data = await _exchange(client, "GET", url, None, headers, timeout_seconds, max_bytes + 1)
    response.raise_for_status()
    if len(data) > max_bytes:
        raise ssrf.TooLarge(f"{url} answered more than {max_bytes} bytes")
    return data, response.headers.get("content-type", "")


async def _exchange(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    content: bytes | None,
    headers: dict[str, str],
    timeout_seconds: float,
    limit: int,
) -> tuple[httpx.Response, bytes]:
    url = ssrf.normalized(url)
    # Identity encoding and raw reads: the cap counts bytes on the wire, so no decompression bomb gets past it.
    sent_headers = {**headers, "Accept-Encoding": "identity"}
    timeout = httpx.Timeout(timeout_seconds, connect=min(CONNECT_TIMEOUT_SECONDS, timeout_seconds))
    try:
        # httpx times each read; the outer deadline also stops a server that answers a byte at a time.
        async with (
            asyncio.timeout(timeout_seconds),
            client.stream(
                method, url, content=content, headers=sent_headers, timeout=timeout, follow_redirects=False
            ) as response,
        ):
            data = bytearray()
            async for chunk in response.aiter_raw():
                data += chunk[: limit - len(data)]
                if len(data) >= limit:
                    break
            return response, bytes(data)
    except TimeoutError as exc:
        raise httpx.ReadTimeout(f"{url} did not answer in full within {timeout_seconds} s") from exc
