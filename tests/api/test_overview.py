"""`GET /api/v1/overview`: counts, the last hour per minute, timings, the DLQ's trend and failing endpoints, each
from rows written here with known times; a client sees its own jobs' figures only, an admin every client's."""

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.names import Names
from app.main import create_app
from app.models.tables import ATTEMPTS, DELIVERIES, JOB_EVENTS, JOBS
from tests.conftest import ADMIN_KEY, make_settings
from tests.support import Api, api_with, make_delivery, make_job

STATUSES = [
    "pending",
    "waiting",
    "scheduled",
    "queued",
    "running",
    "retrying",
    "succeeded",
    "dead_lettered",
    "cancelled",
]


@pytest.fixture
def settings() -> Settings:
    """Every call reads the database: the tests write rows between calls."""
    return make_settings(overview_cache_seconds=0)


def now() -> datetime:
    return datetime.now(UTC)


def minute_of(moment: datetime) -> str:
    return moment.replace(second=0, microsecond=0).isoformat().replace("+00:00", "Z")


async def write(db: AsyncEngine, *jobs: dict[str, Any], events: list[dict[str, Any]] | None = None) -> None:
    async with db.begin() as conn:
        # one statement for many rows takes its columns from the first: give every row run_at
        await conn.execute(insert(JOBS), [{"run_at": None, **job} for job in jobs])
        if events:
            await conn.execute(insert(JOB_EVENTS), events)


def finished(client: str, status: str, at: datetime, job_type: str = "echo", **more: Any) -> dict[str, Any]:
    """A job of `client` that ended at `at`, having run for a second after a wait of two."""
    return make_job(
        at - timedelta(seconds=3),
        client_id=client,
        job_type=job_type,
        status=status,
        started_at=at - timedelta(seconds=1),
        finished_at=at,
        **more,
    )


async def overview(api: Api, headers: dict[str, str]) -> dict[str, Any]:
    answer = await api.client.get("/api/v1/overview", headers=headers)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_a_client_gets_its_jobs_counted_by_status_and_type(api: Api, db: AsyncEngine) -> None:
    client = f"ov-{uuid.uuid4().hex[:8]}"
    headers, at = await api.new_client(client), now()
    await write(
        db,
        *(make_job(at, client_id=client, status="queued") for _ in range(2)),
        make_job(at, client_id=client, status="running", started_at=at),
        *(finished(client, "succeeded", at) for _ in range(3)),
        finished(client, "dead_lettered", at, job_type="document", dead_reason="exhausted"),
        make_job(at, client_id=client, status="retrying"),
    )
    body = await overview(api, headers)
    expected = dict.fromkeys(STATUSES, 0) | {
        "queued": 2,
        "running": 1,
        "succeeded": 3,
        "dead_lettered": 1,
        "retrying": 1,
    }
    assert body["counts"] == expected
    assert body["by_type"] == [
        {"job_type": "document", "counts": {"dead_lettered": 1}},
        {"job_type": "echo", "counts": {"queued": 2, "running": 1, "retrying": 1, "succeeded": 3}},
    ]
    assert body["dlq"]["size"] == 1 and body["fresh_for_seconds"] == 0


async def test_a_client_never_sees_another_clients_figures_and_an_admin_sees_both(api: Api, db: AsyncEngine) -> None:
    mine, theirs = f"ov-mine-{uuid.uuid4().hex[:6]}", f"ov-theirs-{uuid.uuid4().hex[:6]}"
    my_key, their_key, at = await api.new_client(mine), await api.new_client(theirs), now()
    await write(
        db,
        finished(mine, "succeeded", at),
        *(finished(theirs, "dead_lettered", at, dead_reason="exhausted") for _ in range(4)),
        *(make_job(at, client_id=theirs, status="queued", job_type="document") for _ in range(5)),
    )
    me, them, admin = await overview(api, my_key), await overview(api, their_key), await overview(api, api.admin)
    assert me["counts"]["succeeded"] == 1 and me["counts"]["dead_lettered"] == 0 and me["counts"]["queued"] == 0
    assert me["by_type"] == [{"job_type": "echo", "counts": {"succeeded": 1}}]
    assert me["dlq"]["size"] == 0 and sum(m["dead_lettered"] for m in me["throughput"]["minutes"]) == 0
    assert them["counts"]["dead_lettered"] == 4 and them["counts"]["queued"] == 5
    assert them["throughput"]["last_hour"]["succeeded"] == 0
    for status in ("succeeded", "dead_lettered", "queued"):
        assert admin["counts"][status] >= me["counts"][status] + them["counts"][status]


async def test_the_minute_buckets_hold_what_finished_this_minute_and_not_two_hours_ago(
    api: Api, db: AsyncEngine
) -> None:
    client = f"ov-min-{uuid.uuid4().hex[:8]}"
    headers, at = await api.new_client(client), now()
    retried = make_job(at, client_id=client, status="retrying", attempts=1)
    await write(
        db,
        *(finished(client, "succeeded", at) for _ in range(3)),
        finished(client, "dead_lettered", at, dead_reason="exhausted"),
        finished(client, "cancelled", at),
        retried,
        finished(client, "succeeded", at - timedelta(hours=2)),
        events=[{"job_id": retried["id"], "event": "retrying", "detail": {}, "created_at": at}],
    )
    body = await overview(api, headers)
    minutes = body["throughput"]["minutes"]
    assert len(minutes) == 60 and body["throughput"]["bucket_seconds"] == 60
    this_minute = next(m for m in minutes if m["at"] == minute_of(at))
    assert {k: this_minute[k] for k in ("succeeded", "retrying", "dead_lettered", "cancelled")} == {
        "succeeded": 3,
        "retrying": 1,
        "dead_lettered": 1,
        "cancelled": 1,
    }
    assert this_minute["failure_rate"] == pytest.approx(2 / 5)
    # created 3 s before it finished: every job but the one two hours old, in this minute or the one before
    assert body["throughput"]["last_hour"]["submitted"] == 6
    assert body["throughput"]["last_hour"]["succeeded"] == 3


async def test_percentiles_of_run_time_and_queue_wait_come_from_the_known_times(api: Api, db: AsyncEngine) -> None:
    client = f"ov-pct-{uuid.uuid4().hex[:8]}"
    headers, at = await api.new_client(client), now()
    jobs = []
    for i in range(1, 21):  # waits of 1..20 s, runs of 0.1..2.0 s
        started = at - timedelta(minutes=5) + timedelta(seconds=i)
        jobs.append(
            make_job(
                started - timedelta(seconds=i),
                client_id=client,
                job_type="image",
                status="succeeded",
                started_at=started,
                finished_at=started + timedelta(seconds=i / 10),
            )
        )
    scheduled_start = at - timedelta(minutes=2)  # due at run_at, a minute after it was created: it waited 0.5 s
    jobs.append(
        make_job(
            scheduled_start - timedelta(minutes=1),
            client_id=client,
            job_type="report",
            status="succeeded",
            run_at=scheduled_start - timedelta(seconds=0.5),
            started_at=scheduled_start,
            finished_at=scheduled_start + timedelta(seconds=4),
        )
    )
    await write(db, *jobs, finished(client, "succeeded", at - timedelta(hours=2), job_type="report"))
    timings = {t["job_type"]: t for t in (await overview(api, headers))["timings"]}
    assert timings["image"] == {
        "job_type": "image",
        "sample": 20,
        "run_p50": pytest.approx(1.0),
        "run_p95": pytest.approx(1.9),
        "wait_p50": pytest.approx(10.0),
        "wait_p95": pytest.approx(19.0),
    }
    assert timings["report"]["sample"] == 1  # the run two hours ago is not in the last hour
    assert timings["report"]["wait_p50"] == pytest.approx(0.5) and timings["report"]["run_p95"] == pytest.approx(4)


async def test_the_dlq_trend_counts_dead_jobs_per_hour_and_an_hour_ago(api: Api, db: AsyncEngine) -> None:
    client = f"ov-dlq-{uuid.uuid4().hex[:8]}"
    headers, at = await api.new_client(client), now()
    dead = [finished(client, "dead_lettered", at - timedelta(minutes=1), dead_reason="exhausted") for _ in range(2)]
    dead += [finished(client, "dead_lettered", at - timedelta(hours=5), dead_reason="exhausted") for _ in range(3)]
    dead += [finished(client, "dead_lettered", at - timedelta(days=3), dead_reason="exhausted")]
    await write(db, *dead)
    dlq = (await overview(api, headers))["dlq"]
    assert (dlq["size"], dlq["last_hour"], dlq["an_hour_ago"]) == (6, 2, 4)
    assert len(dlq["hourly"]) == 24 and sum(h["dead_lettered"] for h in dlq["hourly"]) == 5
    five_hours_ago = (at - timedelta(hours=5)).replace(minute=0, second=0, microsecond=0)
    assert {h["at"]: h["dead_lettered"] for h in dlq["hourly"]}[five_hours_ago.isoformat().replace("+00:00", "Z")] == 3


@pytest.fixture
async def redis_client(settings: Settings) -> AsyncIterator[Redis]:
    client = Redis.from_url(settings.redis_url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_failing_endpoints_are_the_callers_with_failures_or_an_open_circuit(
    api: Api, db: AsyncEngine, settings: Settings, redis_client: Redis
) -> None:
    mine, theirs = f"ov-hook-{uuid.uuid4().hex[:6]}", f"ov-hook-{uuid.uuid4().hex[:6]}"
    my_key, their_key = await api.new_client(mine), await api.new_client(theirs)
    failing, open_one, quiet = [await endpoint(api, my_key, n) for n in ("failing", "open", "quiet")]
    other = await endpoint(api, their_key, "other")
    at = now()
    async with db.begin() as conn:
        for n, (endpoint_id, client) in enumerate([(failing, mine), (failing, mine), (other, theirs)]):
            delivery_id = f"msg_{uuid.uuid4().hex}"
            job = make_job(at, client_id=client)
            await conn.execute(insert(JOBS).values(**job))
            await conn.execute(
                insert(DELIVERIES).values(
                    **make_delivery(delivery_id, job["id"], client, at) | {"endpoint_id": endpoint_id}
                )
            )
            await conn.execute(
                insert(ATTEMPTS).values(
                    delivery_id=delivery_id,
                    attempt=1,
                    status_code=500,
                    duration_ms=3.0,
                    error="HTTP 500" if n else "connect refused",
                    response_body=None,
                    created_at=at - timedelta(minutes=n),
                    next_attempt_at=None,
                )
            )
    await redis_client.hset(
        Names(settings.namespace).endpoint_breaker_key(open_one), mapping={"opened_at": at.timestamp()}
    )
    try:
        body = await overview(api, my_key)
    finally:
        await redis_client.delete(Names(settings.namespace).endpoint_breaker_key(open_one))
    shown = {e["id"]: e for e in body["failing_endpoints"]}
    assert set(shown) == {failing, open_one}
    assert quiet not in shown and other not in shown
    assert (shown[failing]["failures"], shown[failing]["last_error"], shown[failing]["circuit"]) == (
        2,
        "connect refused",
        "closed",
    )
    assert (shown[open_one]["failures"], shown[open_one]["circuit"]) == (0, "open")
    assert [e["id"] for e in (await overview(api, their_key))["failing_endpoints"]] == [other]


async def endpoint(api: Api, headers: dict[str, str], name: str) -> str:
    answer = await api.client.post(
        "/api/v1/webhooks", json={"url": f"http://127.0.0.1:9/{name}", "description": name}, headers=headers
    )
    assert answer.status_code == 201, answer.text
    endpoint_id: str = answer.json()["id"]
    return endpoint_id


async def test_an_answer_is_kept_for_its_seconds_per_scope(db: AsyncEngine) -> None:
    client = f"ov-kept-{uuid.uuid4().hex[:8]}"
    async with api_with(create_app(make_settings(overview_cache_seconds=30)), ADMIN_KEY) as api:
        headers = await api.new_client(client)
        first = await overview(api, headers)
        await write(db, finished(client, "succeeded", now()))
        again = await overview(api, headers)
        assert again == first and again["counts"]["succeeded"] == 0 and again["fresh_for_seconds"] == 30
        other = await overview(api, await api.new_client(client))  # another key of the same client: the same scope
        assert other["generated_at"] == first["generated_at"]
    async with api_with(create_app(make_settings(overview_cache_seconds=30)), ADMIN_KEY) as fresh:
        assert (await overview(fresh, headers))["counts"]["succeeded"] == 1


async def test_the_overview_needs_a_key(api: Api) -> None:
    answer = await api.client.get("/api/v1/overview")
    assert answer.status_code == 401 and answer.json()["code"] == "unauthorized"
