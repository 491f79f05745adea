"""POST /api/v1/jobs/batch: many jobs in one request, all or nothing, against the real services."""

import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.names import Lane
from app.main import create_app
from app.models.tables import JOBS
from tests.conftest import ADMIN_KEY, make_settings
from tests.local.private_services import PrivateRabbit
from tests.support import Api, BrokerProbe, api_with, rabbitmq_stopped, trail, until_status, wait_for

BATCH = "/api/v1/jobs/batch"


@pytest.fixture
def settings() -> Settings:
    """A batch within its client's share of each lane: fair turns hold none of it (tests/api/test_fair_turns.py)."""
    return make_settings(fair_share=1000)


def echo(n: int, **fields: Any) -> dict[str, Any]:
    return {"job_type": "echo", "payload": {"n": n}, **fields}


async def post_batch(api: Api, headers: dict[str, str], jobs: list[Any]) -> httpx.Response:
    return await api.client.post(BATCH, json={"jobs": jobs}, headers=headers)


async def count_jobs(db: AsyncEngine, client_id: str) -> int:
    async with db.connect() as conn:
        query = select(func.count()).select_from(JOBS).where(JOBS.c.client_id == client_id)
        return int((await conn.execute(query)).scalar_one())


@contextlib.contextmanager
def statements(engine: AsyncEngine) -> Iterator[list[str]]:
    """Every SQL statement the engine sends while the block runs."""
    sent: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        sent.append(" ".join(statement.split()))

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


@contextlib.contextmanager
def publishes(api: Api) -> Iterator[list[set[str]]]:
    """The job ids of each `publish_many` call the API's broker makes while the block runs (one set per call)."""
    broker = api.app.state.api.resources.broker
    jobs_exchange = api.app.state.api.resources.names.jobs_exchange
    calls: list[set[str]] = []
    publish_many = broker.publish_many

    async def recorded(messages: list[Any]) -> Any:
        calls.append({m.message_id for m in messages if m.exchange == jobs_exchange})
        return await publish_many(messages)

    broker.publish_many = recorded
    try:
        yield calls
    finally:
        del broker.publish_many


@contextlib.asynccontextmanager
async def guarded(**overrides: Any) -> AsyncIterator[Api]:
    async with api_with(create_app(make_settings(**overrides)), ADMIN_KEY) as api:
        yield api


async def test_a_batch_saves_every_job_in_one_transaction_and_answers_in_request_order(
    api: Api, broker: BrokerProbe
) -> None:
    names = broker.topology.names
    await broker.purge(*(names.lane_queue(lane) for lane in Lane))
    headers = {**await api.new_client("batch-ok"), "X-Request-ID": "req-batch-1"}
    jobs = [echo(n, priority=1 + n % 10) for n in range(100)]
    with statements(api.app.state.api.resources.engine) as sent, publishes(api) as calls:
        answer = await post_batch(api, headers, jobs)
        assert answer.status_code == 201, answer.text
        items = answer.json()["items"]
        for item in items:
            await until_status(api, headers, item["job"]["id"], 10, "queued")
    assert [item["outcome"] for item in items] == ["created"] * 100
    assert [item["job"]["payload"] for item in items] == [{"n": n} for n in range(100)]
    assert {item["job"]["request_id"] for item in items} == {"req-batch-1"}
    assert {item["job"]["status"] for item in items} == {"queued"}
    # One multi-row INSERT per table for the save (on PostgreSQL all three in one statement), one UPDATE for
    # pending -> queued; confirms awaited together.
    assert sum("INSERT INTO jobs " in s for s in sent) == 1
    # created, then queued (its audit rows and its events' outbox rows in one statement)
    assert sum("INSERT INTO job_events " in s for s in sent) == 2
    assert sum("UPDATE jobs SET status" in s for s in sent) == 1
    ids = {item["job"]["id"] for item in items}
    assert [len(call) for call in calls if call & ids] == [100]
    # Count this batch's messages only: the outbox relay may publish an earlier test's job meanwhile.
    lanes = [[m.message_id for m in await broker.take_all(names.lane_queue(lane))] for lane in Lane]
    ours = [[message for message in lane if message in ids] for lane in lanes]
    assert sorted(m for lane in ours for m in lane) == sorted(ids) and all(ours)
    events = await trail(api, headers, items[-1]["job"]["id"])
    assert [e["event"] for e in events] == ["created", "queued"]
    listed = (await api.client.get("/api/v1/jobs?limit=3", headers=headers)).json()["items"]
    assert [job["payload"]["n"] for job in listed] == [99, 98, 97]  # newest first keeps the request's order


async def test_the_batch_shape_is_checked_before_anything_is_saved(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("batch-shape")
    cases: list[tuple[Any, str, list[Any]]] = [
        ({"jobs": []}, "too_short", ["body", "jobs"]),
        ({"jobs": [echo(n) for n in range(501)]}, "too_long", ["body", "jobs"]),
        ({}, "missing", ["body", "jobs"]),
        ({"jobs": echo(1)}, "list_type", ["body", "jobs"]),
        ({"jobs": [echo(1)], "extra": 1}, "extra_forbidden", ["body", "extra"]),
    ]
    for body, kind, loc in cases:
        answer = await api.client.post(BATCH, json=body, headers=headers)
        assert answer.status_code == 422, body
        assert [(e["type"], e["loc"]) for e in answer.json()["errors"]] == [(kind, loc)]
    not_object = await api.client.post(BATCH, content=b"[1]", headers=headers)
    assert (not_object.status_code, not_object.json()["code"]) == (422, "not_an_object")
    assert await count_jobs(db, "batch-shape") == 0


async def test_one_bad_item_refuses_the_batch_and_every_error_names_its_index(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("batch-bad-items")
    jobs = [
        echo(0),
        {"job_type": "sleep", "payload": {"seconds": 601}},
        echo(2),
        {"job_type": "nope", "payload": {}},
        "not an object",
        echo(5, priority=11),
    ]
    answer = await post_batch(api, headers, jobs)
    assert answer.status_code == 422
    error = answer.json()
    assert error["code"] == "validation_error"
    assert [e["loc"] for e in error["errors"]] == [
        ["body", "jobs", 1, "payload", "seconds"],
        ["body", "jobs", 3, "job_type"],
        ["body", "jobs", 4],
        ["body", "jobs", 5, "priority"],
    ]
    assert "body.jobs.1.payload.seconds" in error["detail"] and "body.jobs.5.priority" in error["detail"]
    assert await count_jobs(db, "batch-bad-items") == 0


async def test_idempotency_keys_per_item_across_requests(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("batch-idem")
    single = await api.submit(headers, **echo(1, idempotency_key="k-1"))
    assert single.status_code == 201
    jobs = [echo(1, idempotency_key="k-1"), echo(2, idempotency_key="k-2"), echo(3)]
    first = await post_batch(api, headers, jobs)
    assert first.status_code == 201, first.text
    items = first.json()["items"]
    assert [i["outcome"] for i in items] == ["existing", "created", "created"]
    assert items[0]["job"]["id"] == single.json()["id"]
    again = await post_batch(api, headers, jobs[:2])
    assert [i["outcome"] for i in again.json()["items"]] == ["existing", "existing"]
    assert [i["job"]["id"] for i in again.json()["items"]] == [i["job"]["id"] for i in items[:2]]
    assert await count_jobs(db, "batch-idem") == 3


async def test_a_key_used_for_another_request_is_409_with_its_index_and_saves_nothing(
    api: Api, db: AsyncEngine
) -> None:
    headers = await api.new_client("batch-conflict")
    assert (await api.submit(headers, **echo(1, idempotency_key="taken"))).status_code == 201
    jobs = [echo(10, idempotency_key="fresh-a"), echo(11), echo(99, idempotency_key="taken")]
    answer = await post_batch(api, headers, jobs)
    assert answer.status_code == 409
    error = answer.json()
    assert (error["code"], error["index"]) == ("idempotency_conflict", 2)
    assert "taken" in error["detail"] and "nothing" in error["detail"]
    assert await count_jobs(db, "batch-conflict") == 1
    # The refused batch gave its other keys back: "fresh-a" is free for a different request at once.
    retry = await post_batch(api, headers, [echo(12, idempotency_key="fresh-a")])
    assert retry.status_code == 201 and retry.json()["items"][0]["outcome"] == "created"


async def test_two_items_sharing_a_key_are_one_job_or_a_conflict(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("batch-twins")
    same = await post_batch(api, headers, [echo(1, idempotency_key="twin"), echo(2), echo(1, idempotency_key="twin")])
    assert same.status_code == 201, same.text
    items = same.json()["items"]
    assert [i["outcome"] for i in items] == ["created", "created", "existing"]
    assert items[2]["job"]["id"] == items[0]["job"]["id"]
    different = await post_batch(api, headers, [echo(5, idempotency_key="pair"), echo(6, idempotency_key="pair")])
    assert different.status_code == 409 and different.json()["index"] == 1
    assert await count_jobs(db, "batch-twins") == 2


async def test_a_batch_body_may_exceed_the_single_limit_but_not_the_batch_limit(db: AsyncEngine) -> None:
    async with guarded(max_batch_body_bytes=512 * 1024) as api:
        headers = await api.new_client("batch-size")
        blob = "x" * (100 * 1024)
        fits = await post_batch(api, headers, [echo(n, payload={"blob": blob}) for n in range(3)])  # ~300 KiB
        assert fits.status_code == 201, fits.text
        too_big = await post_batch(api, headers, [echo(n, payload={"blob": blob}) for n in range(6)])  # ~600 KiB
        assert (too_big.status_code, too_big.json()["code"]) == (413, "body_too_large")
        assert "524288" in too_big.json()["detail"]
    assert await count_jobs(db, "batch-size") == 3


async def test_every_job_of_a_batch_counts_against_the_rate_limit_and_a_refusal_counts_none() -> None:
    async with guarded(rate_limit_per_minute=10) as api:
        headers = await api.new_client("batch-limit")
        eight = await post_batch(api, headers, [echo(n) for n in range(8)])
        assert eight.status_code == 201 and eight.headers["X-RateLimit-Remaining"] == "2"
        three = await post_batch(api, headers, [echo(n) for n in range(3)])
        assert (three.status_code, three.json()["code"]) == (429, "rate_limited")
        assert 1 <= int(three.headers["Retry-After"]) <= 60
        assert "batch of 3" in three.json()["detail"]
        two = await post_batch(api, headers, [echo(n) for n in range(2)])  # the refused three counted nothing
        assert two.status_code == 201 and two.headers["X-RateLimit-Remaining"] == "0"
        assert (await api.submit(headers)).status_code == 429
        other = await api.new_client("batch-limit-2")
        assert (await post_batch(api, other, [echo(n) for n in range(10)])).status_code == 201


async def test_a_batch_bigger_than_the_whole_rate_limit_is_a_422_that_says_to_split_it() -> None:
    """Waiting cannot help a batch the limit can never hold: no 429 and no Retry-After, and nothing counted."""
    async with guarded(rate_limit_per_minute=10) as api:
        headers = await api.new_client("batch-never-fits")
        huge = await post_batch(api, headers, [echo(n) for n in range(11)])
        assert (huge.status_code, huge.json()["code"]) == (422, "batch_over_rate_limit"), huge.text
        assert "Retry-After" not in huge.headers
        assert "split it into batches of at most 10" in huge.json()["detail"]
        assert huge.json()["errors"][0]["loc"] == ["body", "jobs"]
        ten = await post_batch(api, headers, [echo(n) for n in range(10)])  # the refused eleven counted nothing
        assert ten.status_code == 201 and ten.headers["X-RateLimit-Remaining"] == "0"


async def test_an_open_circuit_on_any_items_type_refuses_the_batch(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("batch-circuit")
    redis = api.app.state.api.resources.redis
    breaker = api.app.state.api.resources.names.job_breaker_key("sleep")
    await redis.hset(breaker, mapping={"opened_at": time.time(), "window_start": time.time()})
    try:
        refused = await post_batch(api, headers, [echo(1), {"job_type": "sleep", "payload": {"seconds": 0.1}}])
        assert (refused.status_code, refused.json()["code"]) == (503, "circuit_open")
        assert refused.json()["job_types"] == ["sleep"]
        assert 1 <= int(refused.headers["Retry-After"]) <= 30
        assert await count_jobs(db, "batch-circuit") == 0
        assert (await post_batch(api, headers, [echo(1), echo(2)])).status_code == 201  # other types go through
    finally:
        await redis.delete(breaker)


async def test_a_batch_with_the_database_down_is_503() -> None:
    async with guarded(database_url="postgresql+asyncpg://postgres@127.0.0.1:1/none") as api:
        answer = await post_batch(api, api.admin, [echo(1), echo(2)])
    assert (answer.status_code, answer.json()["code"]) == (503, "database_unavailable")
    assert answer.headers["Retry-After"] == "5"


async def test_each_callback_url_passes_the_ssrf_guard(db: AsyncEngine) -> None:
    async with guarded(webhook_allow_private_networks=False) as api:
        headers = await api.new_client("batch-ssrf")
        jobs = [echo(0, callback_url="https://93.184.215.14/hook"), echo(1, callback_url="http://127.0.0.1:9/hook")]
        answer = await post_batch(api, headers, jobs)
    assert (answer.status_code, answer.json()["code"]) == (422, "unsafe_url")
    error = answer.json()
    assert error["index"] == 1 and error["errors"][0]["loc"] == ["body", "jobs", 1, "callback_url"]
    assert "loopback" in error["detail"]
    assert await count_jobs(db, "batch-ssrf") == 0


@pytest.mark.slow
async def test_with_the_broker_down_a_batch_is_pending_then_relayed(private_rabbit: PrivateRabbit) -> None:
    async with guarded(rabbitmq_url=private_rabbit.url) as api:
        headers = await api.new_client("batch-outage")
        with rabbitmq_stopped(private_rabbit):
            answer = await post_batch(api, headers, [echo(1), echo(2)])
            assert answer.status_code == 201, answer.text
            items = answer.json()["items"]
            assert [(i["outcome"], i["job"]["status"]) for i in items] == [("pending", "pending")] * 2

        async def all_queued() -> bool:
            statuses = [(await api.job(headers, item["job"]["id"]))["status"] for item in items]
            return statuses == ["queued", "queued"]

        await wait_for(all_queued, within=30)


async def test_the_openapi_documents_the_batch(api: Api) -> None:
    schema = (await api.client.get("/openapi.json")).json()
    operation = schema["paths"]["/api/v1/jobs/batch"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["jobs"]["items"] == {"$ref": "#/components/schemas/JobRequest"}
    assert (body["properties"]["jobs"]["minItems"], body["properties"]["jobs"]["maxItems"]) == (1, 500)
    assert operation["responses"]["201"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/BatchOut"
    }
    assert {"409", "413", "415", "422", "429", "503"} <= set(operation["responses"])
    assert "batch_over_rate_limit" in operation["responses"]["422"]["description"]
    item = schema["components"]["schemas"]["BatchItemOut"]
    assert set(item["properties"]) == {"outcome", "job"}
    assert schema["components"]["schemas"]["Submitted"]["enum"] == ["created", "pending", "existing"]
