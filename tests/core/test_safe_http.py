"""The pooled client of app/core/safe_http.py against real servers on 127.0.0.1: connections are reused, checked
where they are dialled (rebinding, mixed answers, literals), kept per host name, and TLS verifies the name."""

import asyncio
import datetime
import ipaddress
import re
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.responses import Response

from app.core.dns_cache import DnsCache
from app.core.safe_http import Address, SafeClient, download, post, safe_client
from app.core.ssrf import TooLarge, UnsafeURL
from tests.receiver import Received, Server, serving

ALLOWED = "127.0.0.1"  # the servers listen here; every other address is the test's "forbidden" one
FORBIDDEN = "127.0.0.2"


def only_the_test_server(address: Address) -> str | None:
    return None if address == ipaddress.ip_address(ALLOWED) else "not the test server's address"


@dataclass
class StubResolver:
    """Successive answers per host name (the last one repeats), each with the same TTL; counts its lookups."""

    answers: dict[str, list[list[str]]]
    ttl: float | None = 0
    calls: list[str] = field(default_factory=list)

    async def resolve(self, host: str, port: int) -> tuple[list[str], float | None]:
        self.calls.append(host)
        queue = self.answers[host]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        if not answer:
            raise OSError(f"no address for {host}")
        return answer, self.ttl


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    async with serving() as running:
        yield running


def closing(_: Received) -> Response:
    return Response(b"ok", headers={"Connection": "close"})


def guarded(resolver: StubResolver | None = None, **options: Any) -> SafeClient:
    return safe_client(False, resolver=resolver, policy=only_the_test_server, dns_min_seconds=0, **options)


async def test_200_posts_at_concurrency_8_share_at_most_the_pools_connections(server: Server) -> None:
    slots = asyncio.Semaphore(8)

    async def one(client: SafeClient, n: int) -> int:
        async with slots:
            return (await post(client, server.url(f"/n/{n}"), b"{}", {}, 5)).status_code

    async with guarded(max_connections=4) as client:
        statuses = await asyncio.gather(*(one(client, n) for n in range(200)))
    assert statuses == [200] * 200
    assert len(server.receiver.requests) == 200
    assert 1 <= server.connections <= 4


async def test_at_most_max_per_host_requests_are_in_flight_to_one_origin(server: Server) -> None:
    server.receiver.delay = 0.02  # long enough for the eight callers to overlap
    async with guarded(max_connections=10, max_per_host=2) as client:
        await asyncio.gather(*(post(client, server.url(), b"{}", {}, 5) for _ in range(8)))
    assert len(server.receiver.requests) == 8
    assert server.most_in_flight <= 2 and server.connections <= 2


async def test_a_host_that_rebinds_to_a_forbidden_address_is_refused_on_the_next_dial(server: Server) -> None:
    server.receiver.answer = closing  # the first connection is not kept, so the second request dials again
    resolver = StubResolver({"hooks.test": [[ALLOWED], [FORBIDDEN]]}, ttl=0)
    async with guarded(resolver) as client:
        assert (await post(client, server.url(host="hooks.test"), b"{}", {}, 5)).status_code == 200
        with pytest.raises(UnsafeURL, match=re.escape(f"hooks.test resolves to {FORBIDDEN}, not the test server")):
            await post(client, server.url(host="hooks.test"), b"{}", {}, 5)
    assert len(server.receiver.requests) == 1
    assert resolver.calls == ["hooks.test", "hooks.test"]


async def test_one_forbidden_address_in_an_answer_refuses_the_host(server: Server) -> None:
    resolver = StubResolver({"hooks.test": [[ALLOWED, FORBIDDEN]]})
    async with guarded(resolver) as client:
        with pytest.raises(UnsafeURL, match=re.escape(f"resolves to {FORBIDDEN}")) as refused:
            await post(client, server.url(host="hooks.test"), b"{}", {}, 5)
        with pytest.raises(UnsafeURL, match=re.escape(f"{FORBIDDEN} is not the test server")):
            await post(client, server.url(host=FORBIDDEN), b"{}", {}, 5)  # a literal is checked too
    assert "WEBHOOK_ALLOW_PRIVATE_NETWORKS" in str(refused.value)
    assert server.receiver.requests == [] and server.connections == 0


async def test_the_default_policy_refuses_loopback_unless_private_networks_are_allowed(server: Server) -> None:
    async with safe_client(False) as client:
        with pytest.raises(UnsafeURL, match="a loopback address"):
            await post(client, server.url(), b"{}", {}, 5)
    async with safe_client(True) as client:
        assert (await post(client, server.url(), b"{}", {}, 5)).status_code == 200
    assert len(server.receiver.requests) == 1


async def test_two_host_names_on_one_address_never_share_a_connection(server: Server) -> None:
    resolver = StubResolver({"a.test": [[ALLOWED]], "b.test": [[ALLOWED]]})
    async with guarded(resolver) as client:
        for host in ("a.test", "a.test", "b.test", "a.test", "b.test"):
            assert (await post(client, server.url(host=host), b"{}", {}, 5)).status_code == 200
    port = server.receiver.port
    assert [r.headers["host"] for r in server.receiver.requests[:3]] == [f"a.test:{port}"] * 2 + [f"b.test:{port}"]
    assert server.connections == 2


async def test_a_redirect_comes_back_as_it_is(server: Server) -> None:
    elsewhere = server.url("/elsewhere")
    server.receiver.answer = lambda r: Response(status_code=302, headers={"Location": elsewhere})
    async with guarded() as client:
        assert (await post(client, server.url("/moved"), b"{}", {}, 5)).status_code == 302
    assert [r.path for r in server.receiver.requests] == ["/moved"]


async def test_the_answer_is_capped_on_the_wire_and_timed_out_as_a_whole(server: Server) -> None:
    server.receiver.answer = lambda r: Response(b"x" * 10_000, media_type="image/png")
    server.receiver.delays = {"/slow": 1.0}
    async with guarded() as client:
        assert (await post(client, server.url(), b"{}", {}, 5)).body == "x" * 4096
        assert await download(client, server.url(), {}, 5, 10_000) == (b"x" * 10_000, "image/png")
        with pytest.raises(TooLarge):
            await download(client, server.url(), {}, 5, 9_999)
        with pytest.raises(httpx.TimeoutException):
            await post(client, server.url("/slow"), b"{}", {}, 0.2)
        with pytest.raises(UnsafeURL, match="credentials"):
            await post(client, server.url().replace("://", "://user:pw@"), b"{}", {}, 5)
    assert all(r.headers["accept-encoding"] == "identity" for r in server.receiver.requests)


async def test_tls_verifies_the_host_name_not_the_address(tmp_path: Path) -> None:
    trusted = _self_signed("hooks.test", tmp_path)
    resolver = StubResolver({"hooks.test": [[ALLOWED]], "other.test": [[ALLOWED]]})
    async with (
        serving(tls=tmp_path) as server,
        guarded(resolver, verify=trusted) as client,
    ):
        answer = await post(client, server.url(host="hooks.test", scheme="https"), b"{}", {}, 5)
        assert answer.status_code == 200
        with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
            await post(client, server.url(host="other.test", scheme="https"), b"{}", {}, 5)
    assert [r.headers["host"] for r in server.receiver.requests] == [f"hooks.test:{server.receiver.port}"]


async def test_the_dns_cache_spares_lookups_while_an_answer_is_fresh(server: Server) -> None:
    server.receiver.answer = closing  # every request dials anew, and each dial asks the cache
    resolver = StubResolver({"hooks.test": [[ALLOWED]]}, ttl=None)
    async with guarded(resolver, dns_default_seconds=60) as client:
        for _ in range(3):
            assert (await post(client, server.url(host="hooks.test"), b"{}", {}, 5)).status_code == 200
    assert (server.connections, resolver.calls) == (3, ["hooks.test"])


@pytest.mark.parametrize(("reported", "kept"), [(10, 10), (1, 5), (1000, 60), (None, 30)])
async def test_an_answer_is_kept_for_its_ttl_within_the_bounds(reported: float | None, kept: float) -> None:
    clock = Clock()
    resolver = StubResolver({"hooks.test": [[ALLOWED]]}, ttl=reported)
    cache = DnsCache(resolver, min_seconds=5, max_seconds=60, default_seconds=30, clock=clock)
    assert await cache.resolve("hooks.test", 443) == [ALLOWED]
    clock.now += kept - 0.1
    await cache.resolve("hooks.test", 443)
    assert len(resolver.calls) == 1
    clock.now += 0.2
    await cache.resolve("hooks.test", 443)
    assert len(resolver.calls) == 2


async def test_a_failed_lookup_is_not_kept() -> None:
    resolver = StubResolver({"hooks.test": [[], [ALLOWED]]}, ttl=60)
    cache = DnsCache(resolver, clock=Clock())
    with pytest.raises(OSError):
        await cache.resolve("hooks.test", 443)
    assert await cache.resolve("hooks.test", 443) == [ALLOWED]
    assert len(resolver.calls) == 2


async def test_a_name_that_does_not_resolve_is_refused() -> None:
    async with guarded(StubResolver({"nothing.test": [[]]})) as client:
        with pytest.raises(UnsafeURL, match=re.escape("nothing.test could not be resolved")):
            await post(client, "http://nothing.test/hook", b"{}", {}, 5)


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def _self_signed(name: str, directory: Path) -> ssl.SSLContext:
    """A certificate for `name` only, written as cert.pem and key.pem; a client context that trusts it."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    (directory / "cert.pem").write_bytes(pem)
    (directory / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ssl.create_default_context(cadata=pem.decode())


def test_the_socket_of_every_dial_is_opened_only_for_an_allowed_address() -> None:
    dials: list[tuple[str, int]] = []
    client = safe_client(False, policy=only_the_test_server, dialled=lambda *dial: dials.append(dial))
    with pytest.raises(UnsafeURL, match=re.escape(f"{FORBIDDEN} is not the test server")):
        client.guard.socket_for((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (FORBIDDEN, 80)))
    sock = client.guard.socket_for((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (ALLOWED, 80)))
    sock.close()
    assert dials == [(ALLOWED, 80)]


async def test_a_closed_client_closes_its_connections_and_opens_a_new_pool_when_used_again(server: Server) -> None:
    async with guarded() as client:
        assert (await post(client, server.url(), b"{}", {}, 5)).status_code == 200
        await client.aclose()  # a worker stopped, then started again
        assert (await post(client, server.url(), b"{}", {}, 5)).status_code == 200
    assert server.connections == 2
