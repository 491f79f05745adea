"""The SSRF guard: which URLs are refused, and real HTTP through the guarded client to a local receiver."""

import ipaddress
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from app.core.safe_http import download, post, safe_client
from app.core.ssrf import TooLarge, UnsafeURL, check_syntax, refusal, resolve

BIG = b"x" * 10 * 1024


class Receiver(ThreadingHTTPServer):
    """A local endpoint that answers by path and remembers every request that reached it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.release = threading.Event()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.server_address[1]}{path}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet: some tests hang up on purpose before the answer is written."""


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_GET(self) -> None:
        self.answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.answer()

    def answer(self) -> None:
        self.server.seen.append((self.command, self.path, dict(self.headers)))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            self.server.release.wait(2)
        if self.path == "/drip":
            self.drip()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BIG)))
        self.end_headers()
        self.wfile.write(BIG)

    def drip(self) -> None:
        """A byte every 0.1 s: each read is quick, the whole answer is not."""
        self.send_response(200)
        self.send_header("Content-Length", "100")
        self.end_headers()
        for _ in range(100):
            if self.server.release.wait(0.1):
                return
            self.wfile.write(b"x")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with safe_client(allow_private=True) as client:
        yield client


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1", "127.0.0.1 is a loopback address"),
        ("http://169.254.169.254", "link-local"),
        ("http://[::1]", "loopback"),
        ("http://[::ffff:127.0.0.1]", "IPv4-mapped form of 127.0.0.1, a loopback address"),
        ("http://[::ffff:0:127.0.0.1]", "::ffff:0:7f00:1, an IPv4-translated form of 127.0.0.1, a loopback address"),
        ("http://[::ffff:0:a9fe:a9fe]", "IPv4-translated form of 169.254.169.254, a link-local address"),
        ("http://2130706433", "127.0.0.1, a loopback address"),
        ("http://0x7f.1", "127.0.0.1, a loopback address"),
        ("http://localhost", "loopback"),
        ("http://10.1.2.3", "private"),
        ("http://100.64.0.1", "carrier-grade NAT"),
        ("http://[fe80::1]", "link-local"),
        ("http://[2002:7f00:1::1]", "6to4"),
        ("http://0.0.0.0", "unspecified"),
    ],
)
async def test_non_public_addresses_are_refused(url: str, why: str) -> None:
    with pytest.raises(UnsafeURL, match=re.escape(why)) as refused:
        await resolve(url, allow_private=False)
    assert "WEBHOOK_ALLOW_PRIVATE_NETWORKS" in str(refused.value)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com", "not an http or https URL"),
        ("http://user:pw@example.com", "http://***@example.com carries credentials"),
        ("ftp://user:pw@example.com", "ftp://***@example.com is not an http or https URL"),
        ("http://", "no host"),
        ("http://[::1", "not a valid URL"),
        ("http://example.com:99999/", "not a valid URL"),
        ("http://example.com/a b", "spaces or control characters"),
        ("http://example.com/" + "a" * 2048, "at most 2048"),
    ],
)
async def test_malformed_urls_are_refused_before_any_lookup(url: str, why: str) -> None:
    with pytest.raises(UnsafeURL, match=re.escape(why)):
        check_syntax(url)
    with pytest.raises(UnsafeURL, match=re.escape(why)):
        await resolve(url, allow_private=True)


async def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(UnsafeURL, match="could not be resolved"):
        await resolve("https://nothing-here.invalid/hook", allow_private=True)


async def test_a_public_literal_passes_without_dns() -> None:
    target = await resolve("http://93.184.216.34/x?y=1", allow_private=False)
    assert (target.scheme, target.host, target.port, target.ip) == ("http", "93.184.216.34", 80, "93.184.216.34")


async def test_an_ipv6_target_is_read_without_its_brackets() -> None:
    target = await resolve("https://[2606:4700:4700::1111]:8443/a?b=c#frag", allow_private=False)
    assert (target.host, target.port, target.ip) == ("2606:4700:4700::1111", 8443, "2606:4700:4700::1111")


async def test_private_addresses_pass_when_allowed() -> None:
    target = await resolve("http://127.0.0.1:8123/hook", allow_private=True)
    assert (target.ip, target.port) == ("127.0.0.1", 8123)


async def test_one_refused_address_among_good_ones_refuses_the_url() -> None:
    class Rotating:
        async def resolve(self, host: str, port: int) -> tuple[list[str], float | None]:
            return ["93.184.216.34", "10.0.0.7"], None

    with pytest.raises(UnsafeURL, match=re.escape("10.0.0.7, a private address")):
        await resolve("https://rebinding.example/hook", allow_private=False, resolver=Rotating())
    target = await resolve("https://rebinding.example/hook", allow_private=True, resolver=Rotating())
    assert (target.ip, target.host) == ("93.184.216.34", "rebinding.example")


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "172.32.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "::ffff:0:808:808"],
)
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("172.31.255.255", "a private address"),
        ("100.127.255.255", "a carrier-grade NAT address"),
        ("0.1.2.3", "an unspecified ('this network') address"),
        ("224.0.0.1", "a multicast address"),
        ("255.255.255.255", "a reserved address"),
        ("192.0.2.1", "a special-purpose (non-public) address"),
        ("198.18.0.1", "a special-purpose (non-public) address"),
        ("::", "an unspecified address"),
        ("fd12:3456::1", "a private (unique local) address"),
        ("ff02::1", "a multicast address"),
        ("2001:0:4136:e378::1", "a Teredo address"),
        ("::ffff:10.0.0.1", "an IPv4-mapped form of 10.0.0.1, a private address"),
        ("::127.0.0.1", "an IPv4-compatible form of 127.0.0.1, a loopback address"),
        ("64:ff9b::a9fe:a9fe", "a NAT64 form of 169.254.169.254, a link-local address"),
        ("::ffff:0:127.0.0.1", "an IPv4-translated form of 127.0.0.1, a loopback address"),
        ("::ffff:0:10.0.0.1", "an IPv4-translated form of 10.0.0.1, a private address"),
        ("::ffff:0:0:0", "an IPv4-translated form of 0.0.0.0, an unspecified ('this network') address"),
        ("2002:808:808::1", "a 6to4 address"),  # refused whatever it carries, as Teredo is
        ("64:ff9b:1::808:808", "a local-use NAT64 address"),
        ("3fff::1", "a documentation address"),
        ("5f00::1", "a reserved (unallocated) IPv6 address"),
        ("4000::1", "a reserved (unallocated) IPv6 address"),
        ("::ffff:1:0:0:1", "a reserved (unallocated) IPv6 address"),
        ("0:0:0:0:1::1", "a reserved (unallocated) IPv6 address"),
    ],
)
def test_refused_addresses_name_the_reason(address: str, why: str) -> None:
    assert refusal(ipaddress.ip_address(address)) == why


async def test_post_reads_at_most_4096_bytes_of_the_answer(receiver: Receiver, client: httpx.AsyncClient) -> None:
    response = await post(client, receiver.url("/big"), b"{}", {"Content-Type": "application/json"}, 5)
    assert response.status_code == 200
    assert response.body == "x" * 4096
    assert response.duration_ms > 0


async def test_post_does_not_follow_a_redirect(receiver: Receiver, client: httpx.AsyncClient) -> None:
    response = await post(client, receiver.url("/redirect"), b"{}", {}, 5)
    assert response.status_code == 302
    assert len(receiver.seen) == 1


async def test_post_times_out(receiver: Receiver, client: httpx.AsyncClient) -> None:
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        await post(client, receiver.url("/slow"), b"{}", {}, 0.5)
    assert time.monotonic() - started < 1.5


async def test_post_times_out_on_an_answer_that_drips(receiver: Receiver, client: httpx.AsyncClient) -> None:
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        await post(client, receiver.url("/drip"), b"{}", {}, 0.5)
    assert time.monotonic() - started < 1.5


async def test_the_request_carries_the_host_name_it_was_given(receiver: Receiver, client: httpx.AsyncClient) -> None:
    await post(client, receiver.url("/host", host="localhost"), b"{}", {"X-Request-ID": "req_1"}, 5)
    [(method, path, headers)] = receiver.seen
    assert (method, path) == ("POST", "/host")
    assert headers["Host"] == f"localhost:{receiver.server_address[1]}"
    assert headers["X-Request-ID"] == "req_1"


async def test_download_refuses_a_body_over_the_cap(receiver: Receiver, client: httpx.AsyncClient) -> None:
    with pytest.raises(TooLarge):
        await download(client, receiver.url("/big"), {}, 5, max_bytes=1000)
    assert (await download(client, receiver.url("/big"), {}, 5, max_bytes=len(BIG)))[0] == BIG


async def test_download_raises_on_a_non_2xx_answer(receiver: Receiver, client: httpx.AsyncClient) -> None:
    with pytest.raises(httpx.HTTPStatusError):
        await download(client, receiver.url("/redirect"), {}, 5, max_bytes=1000)
