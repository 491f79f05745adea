"""Unique jobs through the API (docs/job-types.md, "Unique jobs"), on PostgreSQL and on SQLite (the portable
store): a duplicate submit makes nothing and answers 200 with the job that holds the key, whatever its payload;
twenty at once make one job; the key holds while its job is not terminal and for its window, then a submit
releases it; another client's key of the same name is its own; a batch's items and bad values as the contract
says."""

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.main import create_app
from app.models.tables import JOBS
from tests.conftest import ADMIN_KEY, make_settings
from tests.support import Api, api_with, wait_for


@pytest.fixture(params=["postgresql", "sqlite"])
async def service(request: pytest.FixtureRequest, settings: Settings, sqlite_url: str) -> AsyncIterator[Api]:
    """The API in this process on PostgreSQL, then on a fresh SQLite file (no worker: jobs wait queued)."""
    on = settings if request.param == "postgresql" else make_settings(database_url=sqlite_url)
    async with api_with(create_app(on), ADMIN_KEY) as running:
        yield running


def engine_of(api: Api) -> AsyncEngine:
    engine: AsyncEngine = api.app.state.api.jobs.engine
    return engine


async def unique_rows(api: Api, client_id: str, key: str) -> list[dict[str, Any]]:
    """The client's jobs submitted with `key`, oldest first: id, status and the key they hold now."""
    query = (
        select(JOBS.c.id, JOBS.c.status, JOBS.c.unique_live)
        .where(JOBS.c.client_id == client_id, JOBS.c.unique_key == key)
        .order_by(JOBS.c.created_at)
    )
    async with engine_of(api).connect() as conn:
        return [dict(row._mapping) for row in await conn.execute(query)]


async def age(api: Api, job_id: str, seconds: float) -> None:
    """Move a job's creation `seconds` into the past, as time passing would."""
    async with engine_of(api).begin() as conn:
        stamp = (await conn.execute(select(JOBS.c.created_at).where(JOBS.c.id == job_id))).scalar_one()
        await conn.execute(
            update(JOBS).where(JOBS.c.id == job_id).values(created_at=stamp - timedelta(seconds=seconds))
        )


async def cancel(api: Api, headers: dict[str, str], job_id: str) -> None:
    answer = await api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=headers)
    assert answer.status_code == 200 and answer.json()["status"] == "cancelled", answer.text


async def test_twenty_concurrent_submits_of_one_key_make_one_job(service: Api) -> None:
    headers = await service.new_client("unique-crowd")
    answers = await asyncio.gather(
        *(service.submit(headers, payload={"n": n}, unique={"key": "sync-user-42"}) for n in range(20))
    )

    codes = sorted(answer.status_code for answer in answers)
    assert codes == [200] * 19 + [201], [a.text for a in answers]
    assert len({answer.json()["id"] for answer in answers}) == 1
    created = next(answer.json() for answer in answers if answer.status_code == 201)
    assert all(answer.json()["payload"] == created["payload"] for answer in answers)
    assert [row["id"] for row in await unique_rows(service, "unique-crowd", "sync-user-42")] == [created["id"]]


async def test_the_key_holds_until_its_job_is_terminal_then_a_submit_releases_it(service: Api) -> None:
    headers = await service.new_client("unique-life")
    first = await service.submit(headers, payload={"n": 1}, unique={"key": "k"})
    assert first.status_code == 201, first.text
    assert first.json()["unique"] == {"key": "k", "for_seconds": None}
    again = await service.submit(headers, payload={"n": 2}, unique={"key": "k"})
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])

    await cancel(service, headers, first.json()["id"])
    after = await service.submit(headers, payload={"n": 3}, unique={"key": "k"})

    assert after.status_code == 201, after.text
    assert after.json()["id"] != first.json()["id"] and after.json()["payload"] == {"n": 3}
    rows = await unique_rows(service, "unique-life", "k")
    assert [(r["id"], r["unique_live"]) for r in rows] == [(first.json()["id"], None), (after.json()["id"], "k")]
    assert (await service.job(headers, first.json()["id"]))["unique"] == {"key": "k", "for_seconds": None}


async def test_a_window_holds_the_key_of_a_finished_job_until_it_has_passed(service: Api) -> None:
    headers = await service.new_client("unique-window")
    body = {"unique": {"key": "nightly", "for_seconds": 300}}
    first = (await service.submit(headers, payload={"n": 1}, **body)).json()
    assert first["unique"] == {"key": "nightly", "for_seconds": 300}
    await cancel(service, headers, first["id"])

    await age(service, first["id"], 290)
    within = await service.submit(headers, payload={"n": 2}, **body)
    assert (within.status_code, within.json()["id"], within.json()["status"]) == (200, first["id"], "cancelled")
    # The window is the first job's: a later submit's own window does not stretch or shorten it.
    shorter = await service.submit(headers, payload={"n": 3}, unique={"key": "nightly", "for_seconds": 1})
    assert (shorter.status_code, shorter.json()["id"]) == (200, first["id"])

    await age(service, first["id"], 11)
    past = await service.submit(headers, payload={"n": 4}, **body)

    assert past.status_code == 201, past.text
    assert [r["unique_live"] for r in await unique_rows(service, "unique-window", "nightly")] == [None, "nightly"]


async def test_another_clients_key_of_the_same_name_is_its_own(service: Api) -> None:
    mine, theirs = await service.new_client("unique-mine"), await service.new_client("unique-theirs")
    a = await service.submit(mine, unique={"key": "shared-name"})
    b = await service.submit(theirs, unique={"key": "shared-name"})

    assert (a.status_code, b.status_code) == (201, 201), (a.text, b.text)
    assert a.json()["id"] != b.json()["id"]
    assert (await service.submit(theirs, unique={"key": "shared-name"})).json()["id"] == b.json()["id"]


async def test_a_batch_makes_one_job_per_key_and_answers_existing_for_the_rest(service: Api) -> None:
    headers = await service.new_client("unique-batch")
    held = (await service.submit(headers, payload={"held": True}, unique={"key": "a"})).json()
    items = [
        {"job_type": "echo", "payload": {"n": 0}, "unique": {"key": "a"}},
        {"job_type": "echo", "payload": {"n": 1}, "unique": {"key": "b"}},
        {"job_type": "echo", "payload": {"n": 2}, "unique": {"key": "b", "for_seconds": 60}},
        {"job_type": "echo", "payload": {"n": 3}},
    ]

    answer = await service.client.post("/api/v1/jobs/batch", json={"jobs": items}, headers=headers)

    assert answer.status_code == 201, answer.text
    placed = answer.json()["items"]
    assert [item["outcome"] for item in placed] == ["existing", "created", "existing", "created"]
    assert placed[0]["job"]["id"] == held["id"]
    assert placed[2]["job"]["id"] == placed[1]["job"]["id"] and placed[1]["job"]["payload"] == {"n": 1}
    assert placed[3]["job"]["unique"] is None
    async with engine_of(service).connect() as conn:
        count = select(func.count()).select_from(JOBS).where(JOBS.c.client_id == "unique-batch")
        assert (await conn.execute(count)).scalar_one() == 3


async def test_a_unique_key_differs_from_an_idempotency_key_and_bad_values_are_422s(api: Api) -> None:
    headers = await api.new_client("unique-input")
    first = await api.submit(headers, payload={"n": 1}, unique={"key": "u"}, idempotency_key="i-1")
    other = await api.submit(headers, payload={"n": 2}, unique={"key": "u"}, idempotency_key="i-2")
    assert (first.status_code, other.status_code) == (201, 200)
    assert other.json()["id"] == first.json()["id"]
    # The idempotency key alone for another request is still a conflict.
    reused = await api.submit(headers, payload={"n": 3}, idempotency_key="i-1")
    assert (reused.status_code, reused.json()["code"]) == (409, "idempotency_conflict")
    for bad in (
        {"key": ""},
        {"key": "k" * 256},
        {"key": "k", "for_seconds": -1},
        {"key": "k", "for_seconds": 1.5},
        {"for_seconds": 10},
        {"key": "k", "extra": 1},
    ):
        answer = await api.submit(headers, unique=bad)
        assert answer.status_code == 422, (bad, answer.text)
        assert answer.json()["code"] == "validation_error"
        assert answer.json()["errors"][0]["loc"][:2] == ["body", "unique"], answer.text


async def test_a_workflow_item_takes_a_unique_key_and_one_held_is_a_409_naming_it(api: Api) -> None:
    headers = await api.new_client("unique-workflow")
    held = (await api.submit(headers, unique={"key": "held"})).json()
    item = {"job_type": "echo", "payload": {"n": 1}}
    jobs = [{**item, "ref": "a", "unique": {"key": "fresh"}}, {**item, "ref": "b", "unique": {"key": "held"}}]

    answer = await api.client.post("/api/v1/workflows", json={"jobs": jobs}, headers=headers)
    assert answer.status_code == 409, answer.text
    error = answer.json()
    assert (error["code"], error["index"]) == ("unique_held", 1) and held["id"] in error["detail"]
    twice = [{**item, "ref": "a", "unique": {"key": "same"}}, {**item, "ref": "b", "unique": {"key": "same"}}]
    answer = await api.client.post("/api/v1/workflows", json={"jobs": twice}, headers=headers)
    assert (answer.status_code, answer.json()["code"], answer.json()["index"]) == (409, "unique_held", 1)

    made = await api.client.post("/api/v1/workflows", json={"jobs": jobs[:1]}, headers=headers)
    assert made.status_code == 201, made.text
    job = made.json()["jobs"][0]["job"]
    assert job["unique"] == {"key": "fresh", "for_seconds": None}
    again = await api.submit(headers, unique={"key": "fresh"})
    assert (again.status_code, again.json()["id"], again.json()["workflow_id"]) == (200, job["id"], made.json()["id"])


async def test_a_schedules_firing_makes_nothing_while_its_last_job_holds_the_key(api: Api) -> None:
    headers = await api.new_client("unique-schedule")
    body = {
        "name": "sync",
        "cron": "* * * * * *",
        "timezone": "UTC",
        "job": {"job_type": "echo", "payload": {"sync": True}, "unique": {"key": "sync"}},
    }
    made = (await api.client.post("/api/v1/schedules", json=body, headers=headers)).json()
    try:
        first = await wait_for(lambda: one_row(api, "unique-schedule", "sync"), within=10, interval=0.1)

        async def fired_twice_since() -> bool:  # two firings after the job, each of which found the key held
            schedule = await api.client.get(f"/api/v1/schedules/{made['id']}", headers=headers)
            last = schedule.json()["last_run_at"]
            return last is not None and at(last) >= first["created_at"].replace(microsecond=0) + timedelta(seconds=2)

        await wait_for(fired_twice_since, within=10, interval=0.1)
        assert [r["id"] for r in await unique_rows(api, "unique-schedule", "sync")] == [first["id"]]

        await cancel(api, headers, first["id"])

        async def replaced() -> list[dict[str, Any]] | None:
            rows = await unique_rows(api, "unique-schedule", "sync")
            return rows if len(rows) == 2 else None

        rows = await wait_for(replaced, within=10, interval=0.1)
        assert [(r["id"] == first["id"], r["unique_live"]) for r in rows] == [(True, None), (False, "sync")]
    finally:
        await api.client.delete(f"/api/v1/schedules/{made['id']}", headers=headers)


async def one_row(api: Api, client_id: str, key: str) -> dict[str, Any] | None:
    """The client's first job with `key`, with its creation time, once there is one."""
    query = select(JOBS.c.id, JOBS.c.created_at).where(JOBS.c.client_id == client_id, JOBS.c.unique_key == key)
    async with engine_of(api).connect() as conn:
        row = (await conn.execute(query.order_by(JOBS.c.created_at))).first()
    return dict(row._mapping) if row else None


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
