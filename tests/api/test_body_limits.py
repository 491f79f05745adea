"""Every route that takes a body bounds it the same way: the API key is checked before a byte of the body is read
(401), then its declared type (415 unless JSON), then its size, declared or counted while it streams (413)."""

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.main import create_app
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.support import Api, api_with, app_process, env_without_dotenv, free_port, until_serving

CHUNK = b"x" * (64 * 1024)
BODY_LIMIT = 256 * 1024  # MAX_BODY_BYTES' default
BATCH_LIMIT = 4 * 1024 * 1024  # MAX_BATCH_BODY_BYTES' default
EXPECTED = {
    ("POST", "/api/v1/jobs"),
    ("POST", "/api/v1/jobs/batch"),
    ("POST", "/api/v1/api-keys"),
    ("POST", "/api/v1/webhooks"),
    ("PATCH", "/api/v1/webhooks/{webhook_id}"),
    ("POST", "/api/v1/webhooks/{webhook_id}/recover"),
    ("POST", "/api/v1/schedules"),
    ("PATCH", "/api/v1/schedules/{schedule_id}"),
    ("POST", "/api/v1/dlq/replay"),
}


def body_routes(api: Api) -> list[tuple[str, str]]:
    """Every operation the OpenAPI document gives a request body, as (method, path template)."""
    paths: dict[str, dict[str, Any]] = api.app.openapi()["paths"]
    return sorted(
        (method.upper(), path)
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "requestBody" in operation
    )


def concrete(path: str) -> str:
    return path.replace("{webhook_id}", "0").replace("{schedule_id}", "0")


class Endless:
    """A chunked body of `chunks` 64 KiB parts that opens like JSON; counts the parts the server pulled."""

    def __init__(self, chunks: int) -> None:
        self.chunks, self.pulled = chunks, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b'{"pad": "'
        for _ in range(self.chunks):
            self.pulled += 1
            yield CHUNK


def limit_of(path: str) -> int:
    return BATCH_LIMIT if path.endswith("/batch") or path == "/api/v1/workflows" else BODY_LIMIT


async def test_the_routes_that_take_a_body_are_the_ones_known(api: Api) -> None:
    assert set(body_routes(api)) >= EXPECTED


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-key"])
async def test_a_chunked_body_without_a_valid_key_is_a_401_before_any_of_it_is_read(
    api: Api, authorization: str | None
) -> None:
    headers = {"Content-Type": "application/json"} | ({"Authorization": authorization} if authorization else {})
    for method, path in body_routes(api):
        body = Endless(chunks=256)  # 16 MiB, if it were all read
        answer = await api.client.request(method, concrete(path), content=body, headers=headers)
        assert (answer.status_code, answer.json()["code"]) == (401, "unauthorized"), (method, path, answer.text)
        assert body.pulled == 0, (method, path, body.pulled)


async def test_a_chunked_body_over_the_limit_with_a_key_is_a_413_read_no_further_than_the_limit(api: Api) -> None:
    headers = await api.new_client("limits-chunked") | {"Content-Type": "application/json"}
    for method, path in body_routes(api):
        body = Endless(chunks=256)
        answer = await api.client.request(method, concrete(path), content=body, headers=headers)
        assert (answer.status_code, answer.json()["code"]) == (413, "body_too_large"), (method, path, answer.text)
        assert str(limit_of(path)) in answer.json()["detail"]
        assert body.pulled <= limit_of(path) // len(CHUNK) + 1, (method, path, body.pulled)


async def test_a_declared_length_over_the_limit_is_a_413_before_any_of_the_body_is_read(api: Api) -> None:
    headers = await api.new_client("limits-declared") | {"Content-Type": "application/json"}
    for method, path in body_routes(api):
        body = Endless(chunks=256)
        declared = {**headers, "Content-Length": str(limit_of(path) + 1)}
        answer = await api.client.request(method, concrete(path), content=body, headers=declared)
        assert (answer.status_code, answer.json()["code"]) == (413, "body_too_large"), (method, path, answer.text)
        assert body.pulled == 0, (method, path, body.pulled)
        no_key = {k: v for k, v in declared.items() if k != "Authorization"}
        answer = await api.client.request(method, concrete(path), content=Endless(chunks=1), headers=no_key)
        assert answer.status_code == 401, (method, path, answer.text)


async def test_a_body_another_type_declares_is_a_415_on_every_route(api: Api) -> None:
    headers = await api.new_client("limits-type")
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        for method, path in body_routes(api):
            answer = await api.client.request(
                method, concrete(path), content=b"{}", headers={**headers, "Content-Type": content_type}
            )
            assert (answer.status_code, answer.json()["code"]) == (415, "unsupported_media_type"), (method, path)
            assert "application/json" in answer.json()["detail"]


SCHEDULE = {"name": "no-type", "cron": "0 3 * * *", "timezone": "UTC", "job": {"job_type": "echo", "payload": {}}}


@pytest.mark.parametrize("content_type", [None, "application/json; charset=utf-8", "application/merge-patch+json"])
async def test_json_without_a_content_type_or_with_a_json_type_is_read_as_json_on_every_route(
    api: Api, content_type: str | None
) -> None:
    headers = await api.new_client("limits-json-type") | ({"Content-Type": content_type} if content_type else {})
    created = []
    for path, body in (
        ("/api/v1/jobs", {"job_type": "echo", "payload": {}}),
        ("/api/v1/schedules", SCHEDULE),
        ("/api/v1/webhooks", {"url": "http://127.0.0.1:9/hook", "events": ["job.succeeded"]}),
    ):
        answer = await api.client.post(path, content=json.dumps(body).encode(), headers=headers)
        assert answer.status_code == 201, (path, answer.text)
        created.append((path, answer.json()["id"]))
    for path, created_id in created[1:]:  # no schedule may fire into later tests
        assert (await api.client.delete(f"{path}/{created_id}", headers=headers)).status_code == 204


async def test_the_openapi_document_gives_every_route_that_takes_a_body_its_413_and_415(api: Api) -> None:
    paths = api.app.openapi()["paths"]
    for method, path in body_routes(api):
        responses = paths[path][method.lower()]["responses"]
        assert {"413", "415"} <= set(responses), (method, path)
        assert responses["415"]["content"]["application/json"]["example"]["code"] == "unsupported_media_type"


async def test_a_refusal_at_the_edge_is_counted_under_its_route(api: Api) -> None:
    await api.client.post("/api/v1/schedules", content=b"{}", headers={"Content-Type": "text/plain"})
    metrics = (await api.client.get("/metrics")).text
    assert 'http_requests_total{handler="/api/v1/schedules",method="POST",status="401"}' in metrics


async def test_over_a_socket_a_chunked_body_without_a_key_is_answered_401_while_it_is_still_coming(
    tmp_path: Path,
) -> None:
    """A real server: the client sends the head and one chunk of a body it never ends, then waits. The answer can
    only come before the body's end if the server judged the key without reading the body (reading it, the server
    would wait for the rest until its body deadline, REQUEST_BODY_TIMEOUT_SECONDS, here 60 s)."""
    port = free_port()
    settings = make_settings(port=port, request_body_timeout_seconds=60)
    with app_process(["api"], env_without_dotenv(settings_env(settings)), tmp_path / "api.log") as process:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            await until_serving(http)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = (
            "POST /api/v1/schedules HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b'{"pad": "' + CHUNK
        writer.write(head.encode() + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        await writer.drain()
        try:
            answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=30)
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 401 "), answer
        assert process.popen.poll() is None, process.output()


async def test_a_submit_refused_for_its_body_counts_against_the_rate_limit_like_any_submit() -> None:
    """The contract counts every submit a client sends; the body's checks, run before the route, leave their
    refusal to the route, after the limit is judged."""
    async with api_with(create_app(make_settings(rate_limit_per_minute=3)), ADMIN_KEY) as api:
        headers = await api.new_client("limits-counted") | {"Content-Type": "application/json"}
        refused = [
            await api.client.post("/api/v1/jobs", content=b'{"x": NaN}', headers=headers),
            await api.client.post("/api/v1/jobs", content=b"x" * (BODY_LIMIT + 1), headers=headers),
            await api.client.post("/api/v1/jobs", content=b"{}", headers={**headers, "Content-Type": "text/plain"}),
        ]
        assert [r.status_code for r in refused] == [422, 413, 415]
        over = await api.client.post("/api/v1/jobs", content=b'{"x": NaN}', headers=headers)
        assert (over.status_code, over.json()["code"]) == (429, "rate_limited")
        assert (await api.submit(headers)).status_code == 429


async def test_served_under_a_prefix_the_key_is_still_checked_before_the_body(api: Api) -> None:
    """Behind a proxy that serves the API under a prefix (`root_path`), the paths the checks look at are the
    routes' own."""
    transport = httpx.ASGITransport(app=api.app, root_path="/queue")
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        body = Endless(chunks=256)
        answer = await http.post("/queue/api/v1/schedules", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 401 and body.pulled == 0, (answer.status_code, body.pulled)
