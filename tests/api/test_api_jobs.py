"""Submitting and reading jobs through the API, with the broker and database behind it."""

import asyncio
import json

import aio_pika

from app.core.names import Lane
from app.main import create_app
from tests.conftest import ADMIN_KEY, make_settings
from tests.support import Api, BrokerProbe, api_with, until_status, wait_for


async def test_submit_puts_the_full_job_in_its_lane(api: Api, broker: BrokerProbe) -> None:
    names = broker.topology.names
    lanes = [names.lane_queue(lane) for lane in Lane]
    await broker.purge(*lanes)
    headers = {**await api.new_client("acme"), "X-Request-ID": "req-lane-1"}
    answer = await api.submit(headers, payload={"order": 42}, priority=2, max_retries=1, timeout_seconds=9)
    assert answer.status_code == 201, answer.text
    assert answer.headers["X-Request-ID"] == "req-lane-1"
    job = answer.json()
    assert job["status"] == "queued" and job["request_id"] == "req-lane-1" and job["attempts"] == 0

    messages = await broker.take_all(names.lane_queue(Lane.CRITICAL))
    assert [m.message_id for m in messages] == [job["id"]]
    message = messages[0]
    assert message.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert message.headers["x-request-id"] == "req-lane-1"
    body = json.loads(message.body)
    assert body["payload"] == {"order": 42} and body["job_type"] == "echo" and body["client_id"] == "acme"
    assert body["max_retries"] == 1 and body["timeout_seconds"] == 9
    assert await broker.depth(names.lane_queue(Lane.DEFAULT)) == 0


async def test_priorities_choose_lanes(api: Api, broker: BrokerProbe) -> None:
    names = broker.topology.names
    await broker.purge(*(names.lane_queue(lane) for lane in Lane))
    headers = await api.new_client("lanes")
    for priority in (1, 3, 4, 7, 8, 10):
        assert (await api.submit(headers, priority=priority)).status_code == 201
    depths = {lane: await broker.depth(names.lane_queue(lane)) for lane in Lane}
    assert depths == {Lane.CRITICAL: 2, Lane.DEFAULT: 2, Lane.BULK: 2}


async def test_audit_trail_and_request_id(api: Api) -> None:
    headers = await api.new_client("trail")
    answer = await api.submit(headers)
    assert len(answer.headers["X-Request-ID"]) >= 16  # one was made up for us
    assert answer.json()["status"] == "queued"
    # The row follows the answer within milliseconds (confirmations are applied in batches).
    await until_status(api, headers, answer.json()["id"], 5, "queued")
    events = (await api.client.get(f"/api/v1/jobs/{answer.json()['id']}/events", headers=headers)).json()
    assert [e["event"] for e in events] == ["created", "queued"]
    assert events[1]["detail"] == {"from": "pending", "to": "queued", "attempt": 0}


async def test_each_bad_request_is_a_422_naming_the_field(api: Api) -> None:
    headers = await api.new_client("picky")
    cases = [
        ({"job_type": "nope", "payload": {}}, ["body", "job_type"]),
        ({"job_type": "sleep", "payload": {"seconds": 601}}, ["body", "payload", "seconds"]),
        ({"job_type": "sleep", "payload": {"secs": 1}}, ["body", "payload", "seconds"]),
        ({"job_type": "flaky", "payload": {"fail_times": "x"}}, ["body", "payload", "fail_times"]),
        ({"job_type": "echo", "payload": {}, "priority": 11}, ["body", "priority"]),
        ({"job_type": "echo", "payload": {}, "max_retries": -1}, ["body", "max_retries"]),
        ({"job_type": "echo", "payload": {}, "timeout_seconds": 1501}, ["body", "timeout_seconds"]),
        ({"job_type": "echo", "payload": {}, "callback_url": "ftp://x"}, ["body", "callback_url"]),
        ({"payload": {}}, ["body", "job_type"]),
    ]
    for body, loc in cases:
        answer = await api.client.post("/api/v1/jobs", json=body, headers=headers)
        assert answer.status_code == 422, body
        error = answer.json()
        assert error["code"] == "validation_error"
        assert loc in [e["loc"] for e in error["errors"]], (body, error)
        assert ".".join(loc) in error["detail"]
    for raw, code in ((b"[1, 2]", "not_an_object"), (b"{nope", "invalid_json")):
        answer = await api.client.post("/api/v1/jobs", content=raw, headers=headers)
        assert (answer.status_code, answer.json()["code"]) == (422, code)
    assert (await api.client.get("/api/v1/jobs?limit=201", headers=headers)).status_code == 422
    assert (await api.client.get("/api/v1/jobs?status=bogus", headers=headers)).status_code == 422
    bad_cursor = await api.client.get("/api/v1/jobs?cursor=!!!", headers=headers)
    assert (bad_cursor.status_code, bad_cursor.json()["code"]) == (422, "bad_cursor")
    listed = await api.client.get("/api/v1/jobs", headers=headers)
    assert listed.json()["items"] == []  # nothing was saved by any of the above


async def test_oversized_body_is_413_and_saves_nothing(api: Api) -> None:
    headers = await api.new_client("big")
    body = {"job_type": "echo", "payload": {"blob": "x" * (300 * 1024)}}
    answer = await api.client.post("/api/v1/jobs", json=body, headers=headers)
    assert (answer.status_code, answer.json()["code"]) == (413, "body_too_large")
    assert (await api.client.get("/api/v1/jobs", headers=headers)).json()["items"] == []


async def test_idempotency_key_returns_the_same_job(api: Api) -> None:
    headers = await api.new_client("idem")
    first = await api.submit(headers, idempotency_key="order-1")
    again = await api.client.post(
        "/api/v1/jobs",
        json={"job_type": "echo", "payload": {"n": 1}},
        headers={**headers, "Idempotency-Key": "order-1"},
    )
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    different = await api.submit(headers, idempotency_key="order-1", payload={"n": 2})
    assert (different.status_code, different.json()["code"]) == (409, "idempotency_conflict")
    other_client = await api.submit(await api.new_client("idem2"), idempotency_key="order-1")
    assert other_client.status_code == 201 and other_client.json()["id"] != first.json()["id"]


async def test_database_down_is_503_with_retry_after() -> None:
    settings = make_settings(database_url="postgresql+asyncpg://postgres@127.0.0.1:1/none")
    app = create_app(settings)
    async with api_with(app, ADMIN_KEY) as api:
        client = api.client
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        answer = await client.post("/api/v1/jobs", json={"job_type": "echo", "payload": {}}, headers=headers)
        ready = await client.get("/ready")
    assert answer.status_code == 503
    assert answer.json()["code"] == "database_unavailable"
    assert answer.headers["Retry-After"] == "5"
    assert ready.status_code == 503 and ready.json()["components"]["database"] == "unhealthy"


async def test_health_and_ready(api: Api) -> None:
    assert (await api.client.get("/health")).json() == {"status": "ok"}
    wanted = {
        "status": "ok",
        "components": {
            "database": "healthy",
            "redis": "healthy",
            "rabbitmq": "healthy",
            "job_worker": "disabled",
            "webhook_worker": "disabled",
        },
    }

    async def ready() -> bool:  # a worker process an earlier test killed is listed until its heartbeat expires
        answer = await api.client.get("/ready")
        return answer.status_code == 200 and answer.json() == wanted

    await wait_for(ready, within=30)


async def test_openapi_shows_every_job_types_payload(api: Api) -> None:
    schema = (await api.client.get("/openapi.json")).json()
    components = schema["components"]["schemas"]
    request = components["JobRequest"]
    assert request["discriminator"]["propertyName"] == "job_type"
    assert set(request["discriminator"]["mapping"]) == {"echo", "sleep", "flaky", "document", "image", "notification"}
    assert components["SleepPayload"]["properties"]["seconds"]["maximum"] == 600
    body = schema["paths"]["/api/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/JobRequest"}


async def test_cursor_walks_every_job_once_while_new_ones_arrive(api: Api) -> None:
    headers = await api.new_client("walker")
    existing = set()
    for _ in range(25):
        existing.add((await api.submit(headers)).json()["id"])
    seen: list[str] = []
    cursor = None
    while True:
        query = "/api/v1/jobs?limit=4" + (f"&cursor={cursor}" if cursor else "")
        page, _ = await asyncio.gather(api.client.get(query, headers=headers), api.submit(headers))
        body = page.json()
        seen += [job["id"] for job in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))  # nothing twice
    assert existing <= set(seen)  # everything that was there at the start


async def test_a_whole_number_written_with_a_point_zero_is_the_integer_the_schema_asks_for(api: Api) -> None:
    """JSON Schema's "integer" counts 6.0 as one, so OpenAPI clients may send it; 6.5 is still refused."""
    headers = await api.new_client("whole-numbers")
    taken = await api.submit(headers, job_type="flaky", payload={"fail_times": 1.0}, priority=6.0, max_retries=2.0)
    assert taken.status_code == 201, taken.text
    job = taken.json()
    assert (job["priority"], job["max_retries"], job["payload"]) == (6, 2, {"fail_times": 1, "permanent": False})
    assert type(job["priority"]) is int and type(job["payload"]["fail_times"]) is int
    refused = await api.submit(headers, priority=6.5)
    assert refused.status_code == 422 and "body.priority" in refused.json()["detail"]
    replay = await api.client.post("/api/v1/dlq/replay", json={"limit": 5.0}, headers=headers)
    assert replay.status_code == 200, replay.text
