"""A body sent a byte at a time, slowly, is cut off by REQUEST_BODY_TIMEOUT_SECONDS (408, connection closed); a body
sent at once is not, and a live stream open longer than the deadline is not cut either."""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.support import app_process, env_without_dotenv, free_port, until_serving

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


async def test_a_body_sent_a_byte_at_a_time_is_answered_408_and_the_connection_closed(
    served: tuple[int, dict[str, str]],
) -> None:
    port, headers = served
    body = json.dumps({"job_type": "echo", "payload": {"n": 1}}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {headers['Authorization']}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode())

    async def trickle() -> None:  # one byte every 0.2 s: the whole body would take several deadlines
        for byte in body:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(0.2)

    sender = asyncio.create_task(trickle())
    try:
        answer = await asyncio.wait_for(reader.read(), timeout=30)  # read() returns once the server closes
    finally:
        sender.cancel()
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 408 Request Timeout", answer
    error = json.loads(rest.split(b"\r\n\r\n", 1)[1])
    assert error["code"] == "body_timeout" and "did not arrive within 1 seconds" in error["detail"]


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
