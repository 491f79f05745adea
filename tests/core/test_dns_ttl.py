"""DNS answers are kept for their TTL (issue 13, item 3): the webhook connections' resolver asks a real DNS server
over UDP on loopback (a small one of the test's own, answering A queries with a TTL it sets) through c-ares, and
the guard's cache keeps each answer as long as that TTL says."""

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import cast

import pytest

from app.core.dns_cache import DnsCache
from app.core.ssrf import TtlResolver
from tests.core.test_safe_http import Clock
from tests.support import free_port, wait_for

NAME = "hooks.ttl.example.test"


@dataclass
class TinyDns(asyncio.DatagramProtocol):
    """Answers A queries for the names it holds (address, TTL), no AAAA, and NXDOMAIN for any other name."""

    answers: dict[str, tuple[str, int]]
    asked: list[tuple[str, int]] = field(default_factory=list)
    transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        labels, at = [], 12
        while data[at]:
            labels.append(data[at + 1 : at + 1 + data[at]].decode())
            at += data[at] + 1
        name, (kind, _) = ".".join(labels).lower(), struct.unpack("!HH", data[at + 1 : at + 5])
        self.asked.append((name, kind))
        question = data[12 : at + 5]
        records = b""
        if name in self.answers and kind == 1:
            address, ttl = self.answers[name]
            records = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, ttl, 4) + socket.inet_aton(address)
        flags = 0x8180 if name in self.answers else 0x8183  # a response, recursion available; NXDOMAIN
        header = data[:2] + struct.pack("!HHHHH", flags, 1, 1 if records else 0, 0, 0)
        assert self.transport is not None
        self.transport.sendto(header + question + records, addr)

    def a_queries(self, name: str) -> int:
        return sum(1 for asked, kind in self.asked if asked == name and kind == 1)


@asynccontextmanager
async def tiny_dns(answers: dict[str, tuple[str, int]]) -> AsyncIterator[tuple[TinyDns, str]]:
    port = free_port()
    server = TinyDns(answers)
    transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(
        lambda: server, local_addr=("127.0.0.1", port)
    )
    try:
        yield server, f"127.0.0.1:{port}"
    finally:
        transport.close()


@dataclass
class Answering:
    """The operating system's resolver, as the fallback sees it: one address, no TTL; or, `knows` False, none."""

    knows: bool = True
    asked: list[str] = field(default_factory=list)

    async def resolve(self, host: str, port: int) -> tuple[list[str], float | None]:
        self.asked.append(host)
        if not self.knows:
            raise OSError(f"no address was found for {host}")
        return ["127.0.0.3"], None


@dataclass
class Counting:
    """A resolver that counts how often the cache in front of it asked."""

    resolver: TtlResolver
    asked: int = 0

    async def resolve(self, host: str, port: int) -> tuple[list[str], float | None]:
        self.asked += 1
        return await self.resolver.resolve(host, port)


async def test_the_resolver_reports_the_answers_ttl() -> None:
    async with tiny_dns({NAME: ("127.0.0.2", 7)}) as (server, address):
        resolver = TtlResolver([address])
        try:
            assert await resolver.resolve(NAME, 443) == (["127.0.0.2"], 7.0)
        finally:
            await resolver.close()
    assert server.a_queries(NAME) == 1


async def test_an_answer_is_kept_for_its_ttl_and_asked_again_after_it() -> None:
    """The guard's cache keeps the answer for its TTL (on its own clock, turned here; its default for an answer
    without a TTL is far longer); c-ares below it keeps answers for their TTL too, on the real clock, so once
    that second has passed the DNS server is asked again and its new answer is taken."""
    clock = Clock()
    async with tiny_dns({NAME: ("127.0.0.2", 1)}) as (server, address):
        resolver = Counting(TtlResolver([address]))
        cache = DnsCache(resolver, min_seconds=0.1, max_seconds=300, default_seconds=1000, clock=clock)
        try:
            assert await cache.resolve(NAME, 443) == ["127.0.0.2"]
            clock.now += 0.9
            assert await cache.resolve(NAME, 443) == ["127.0.0.2"]
            assert resolver.asked == 1  # from the cache: its TTL has not run out
            clock.now += 0.2
            await cache.resolve(NAME, 443)
            assert resolver.asked == 2  # the TTL ran out: asked again
            server.answers[NAME] = ("127.0.0.4", 1)

            async def moved() -> bool:
                clock.now += 1.1
                return await cache.resolve(NAME, 443) == ["127.0.0.4"]

            await wait_for(moved, within=10, interval=0.2)  # the DNS server was asked again
        finally:
            await resolver.resolver.close()


async def test_an_answer_with_a_ttl_of_0_is_kept_for_the_caches_least() -> None:
    clock = Clock()
    async with tiny_dns({NAME: ("127.0.0.2", 0)}) as (_, address):
        resolver = Counting(TtlResolver([address]))
        cache = DnsCache(resolver, min_seconds=1, max_seconds=300, default_seconds=1000, clock=clock)
        try:
            await cache.resolve(NAME, 443)
            clock.now += 0.9
            await cache.resolve(NAME, 443)
            assert resolver.asked == 1
            clock.now += 0.2
            await cache.resolve(NAME, 443)
            assert resolver.asked == 2
        finally:
            await resolver.resolver.close()


async def test_a_name_dns_does_not_know_is_asked_of_the_systems_resolver() -> None:
    """A name only the operating system knows (an NSS module's, say) still resolves, as it did when registered;
    a name neither knows is not found."""
    knowing, unknowing = Answering(), Answering(knows=False)
    async with tiny_dns({}) as (_, address):
        for fallback in (knowing, unknowing):
            resolver = TtlResolver([address], fallback=fallback)
            try:
                if fallback.knows:
                    assert await resolver.resolve("printer.ttl.example.test", 443) == (["127.0.0.3"], None)
                else:
                    with pytest.raises(OSError, match="no address was found"):
                        await resolver.resolve("missing.ttl.example.test", 443)
            finally:
                await resolver.close()
    assert (knowing.asked, unknowing.asked) == (["printer.ttl.example.test"], ["missing.ttl.example.test"])


async def test_a_dns_server_that_cannot_be_reached_falls_back_to_the_systems_resolver() -> None:
    fallback = Answering()
    resolver = TtlResolver([f"127.0.0.1:{free_port()}"], fallback=fallback)  # nothing listens there
    try:
        assert await resolver.resolve(NAME, 443) == (["127.0.0.3"], None)
    finally:
        await resolver.close()
    assert fallback.asked == [NAME]
