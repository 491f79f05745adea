"""A request id is printable ASCII, or the service gives the request a fresh one: the same id in the answer, on
the job and in every webhook delivery it causes. Every answer carries exactly one `X-Request-ID`, errors too."""

import re

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import ADMIN_KEY, make_settings
from tests.receiver import Receiver
from tests.support import Api, api_with, wait_for

FRESH = re.compile(r"^[0-9a-f]{32}$")


@pytest.mark.parametrize("sent", [b"caf\xc3\xa9", b"tab\there", b"\xff", b"x" * 129])
async def test_a_request_id_that_is_not_printable_ascii_is_replaced_and_the_new_one_is_used_throughout(
    api: Api, webhook_worker: WebhookWorker, receiver: Receiver, sent: bytes
) -> None:
    headers = await api.new_client("request-ids")
    hook = await api.client.post("/api/v1/webhooks", json={"url": receiver.url("/ids")}, headers=headers)
    assert hook.status_code == 201, hook.text
    test = await api.client.post(
        f"/api/v1/webhooks/{hook.json()['id']}/test", headers={**headers, "X-Request-ID": sent}
    )
    assert test.status_code == 202, test.text
    [given] = test.headers.get_list("x-request-id")
    assert FRESH.match(given), given
    job = await api.client.post(
        "/api/v1/jobs", json={"job_type": "echo", "payload": {}}, headers={**headers, "X-Request-ID": sent}
    )
    [on_job] = job.headers.get_list("x-request-id")
    assert FRESH.match(on_job) and job.json()["request_id"] == on_job

    async def delivered() -> list[str]:
        return [r.headers.get("x-request-id", "") for r in receiver.on("/ids")]

    assert await wait_for(delivered) == [given]


async def test_a_printable_ascii_request_id_is_kept(api: Api) -> None:
    headers = {**await api.new_client("request-ids-kept"), "X-Request-ID": "order-42 / retry #1"}
    answer = await api.client.post("/api/v1/jobs", json={"job_type": "echo", "payload": {}}, headers=headers)
    assert answer.headers.get_list("x-request-id") == ["order-42 / retry #1"]
    assert answer.json()["request_id"] == "order-42 / retry #1"


def failing_app() -> FastAPI:
    """The API over a database that does not answer (a closed loopback port), with one route that fails."""
    app = create_app(make_settings(database_url="postgresql+asyncpg://postgres@127.0.0.1:1/none"))

    @app.get("/api/v1/test-only/broken")
    async def broken() -> None:
        raise RuntimeError("a bug")

    return app


async def test_every_answer_carries_exactly_one_request_id_errors_included() -> None:
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    async with (
        api_with(failing_app(), ADMIN_KEY) as api,
        # A client that reads the 500 the app sends rather than raising the error the app re-raises after it.
        httpx.AsyncClient(
            transport=httpx.ASGITransport(api.app, raise_app_exceptions=False), base_url="http://t"
        ) as http,
    ):
        unavailable = await http.post("/api/v1/jobs", json={"job_type": "echo", "payload": {}}, headers=admin)
        listed = await http.get("/api/v1/jobs", headers={**admin, "X-Request-ID": "mine"})
        broken = await http.get("/api/v1/test-only/broken", headers=admin)
        unauthorized = await http.get("/api/v1/jobs")
    assert (unavailable.status_code, listed.status_code) == (503, 503)
    assert len(unavailable.headers.get_list("x-request-id")) == 1
    assert listed.headers.get_list("x-request-id") == ["mine"]
    assert broken.status_code == 500 and len(broken.headers.get_list("x-request-id")) == 1
    assert unauthorized.status_code == 401 and len(unauthorized.headers.get_list("x-request-id")) == 1


async def test_a_key_that_cannot_be_looked_up_before_a_body_is_read_is_a_clean_503() -> None:
    """The key is checked before the body, outside FastAPI's routes: a database that does not answer is the same
    503 there as in a route, handled (the client that raises what the app lets through raises nothing)."""
    async with api_with(failing_app(), ADMIN_KEY) as api:
        headers = {"Authorization": "Bearer tq_a_client_key"}
        answer = await api.client.post("/api/v1/jobs", json={"job_type": "echo", "payload": {}}, headers=headers)
    assert (answer.status_code, answer.json()["code"]) == (503, "database_unavailable")
    assert answer.headers["Retry-After"] == "5" and len(answer.headers.get_list("x-request-id")) == 1
