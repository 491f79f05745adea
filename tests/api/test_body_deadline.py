"""A body sent a byte at a time, slowly, is cut off by REQUEST_BODY_TIMEOUT_SECONDS (408, connection closed); a body
sent at once is not, and a live stream open longer than the deadline is not cut either."""

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.support import app_process, env_without_dotenv, free_port, until_serving, wait_for

DEADLINE = 1.0


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[int, dict[str, str]]]:
    """An API process with a short body deadline, and a client key's headers."""
    port = free_port()
    settings = make_settings(port=port, request_body_timeout_seconds=DEADLINE, live_ping_seconds=0.3)
    with app_process(["api"], env_without_dotenv(settings_env(settings)), tmp_path / "api.log") as process:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            await until_serving(http)
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            client = {"client_id": "deadline-" + uuid.uuid4().hex[:8]}
            key = (await http.post("/api/v1/api-keys", json=client, headers=admin)).json()["api_key"]
        yield port, {"Authorization": f"Bearer {key}"}
        assert process.popen.poll() is None, process.output()


def request_head(headers: dict[str, str], length: int) -> bytes:
    return (
        f"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {headers['Authorization']}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def assert_408(answer: bytes) -> None:
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 408 Request Timeout", answer
    error = json.loads(rest.split(b"\r\n\r\n", 1)[1])
    assert error["code"] == "body_timeout" and "did not arrive within 1 seconds" in error["detail"]


async def answered_408(http: httpx.AsyncClient) -> float:
    """How many submits this API has answered 408, from its own metrics."""
    text = (await http.get("/metrics")).text
    pattern = r'^http_requests_total\{handler="/api/v1/jobs",method="POST",status="408"\} (\S+)$'
    found = re.search(pattern, text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


async def test_a_body_sent_a_byte_at_a_time_is_answered_408_and_the_connection_closed(
    served: tuple[int, dict[str, str]],
) -> None:
    """The bytes keep coming, each well within the deadline, and the whole body is cut off all the same.

    The client is still sending when the server answers and closes, so a byte may reach the server after its last
    read: its kernel then resets the connection (RFC 1122, 4.2.2.13) and the reset may overtake the answer. How
    soon the next byte follows the close depends on the machine's load, so the test takes a reset as the
    connection closed, as it is, and reads the 408 from the server's own count of its answers."""
    port, headers = served
    body = json.dumps({"job_type": "echo", "payload": {"n": 1}}).encode()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        before = await answered_408(http)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request_head(headers, len(body)))

        sent = 0

        async def trickle() -> None:  # one byte every 0.2 s: the whole body would take several deadlines
            nonlocal sent
            for byte in body:
                writer.write(bytes([byte]))
                await writer.drain()
                sent += 1
                await asyncio.sleep(0.2)

        sender = asyncio.create_task(trickle())
        try:
            answer = await asyncio.wait_for(reader.read(), timeout=30)  # read() returns once the server closes
        except ConnectionResetError:
            answer = b""
        finally:
            sender.cancel()
            writer.close()
        assert sent < len(body), "the whole body went through"
        if answer:
            assert_408(answer)

        async def counted() -> bool:
            return await answered_408(http) == before + 1

        await wait_for(counted)


async def test_a_body_that_stops_coming_is_answered_408_in_full_and_the_connection_closed(
    served: tuple[int, dict[str, str]],
) -> None:
    """Half a body, then nothing: every byte the client sends is there before the deadline starts, so the server
    reads them all, and its answer and close reach the client whole, on any machine."""
    port, headers = served
    body = json.dumps({"job_type": "echo", "payload": {"n": 1}}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_head(headers, len(body)) + body[: len(body) // 2])
    await writer.drain()
    try:
        answer = await asyncio.wait_for(reader.read(), timeout=30)  # read() returns once the server closes
    finally:
        writer.close()
    assert_408(answer)


async def test_a_body_sent_at_once_is_accepted(served: tuple[int, dict[str, str]]) -> None:
    port, headers = served
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        answer = await http.post("/api/v1/jobs", json={"job_type": "echo", "payload": {"n": 1}}, headers=headers)
    assert answer.status_code == 201, answer.text


async def test_a_live_stream_outlives_the_body_deadline(served: tuple[int, dict[str, str]]) -> None:
    port, headers = served
    pings = 0
    async with (
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
        http.stream("GET", "/api/v1/events/stream", headers=headers) as stream,
    ):
        assert stream.status_code == 200
        started = asyncio.get_running_loop().time()
        async for line in stream.aiter_lines():
            pings += line.startswith(":")
            if asyncio.get_running_loop().time() - started > 3 * DEADLINE and pings >= 3:
                break
    assert pings >= 3  # keep-alive comments kept coming well after the body deadline had passed
