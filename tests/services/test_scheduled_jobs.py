"""Jobs submitted with `run_at` or `delay_seconds`: `scheduled` until their time, then queued by the scheduler
in set-based claims two schedulers cannot both win, cancellable while they wait."""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import REGISTRY
from sqlalchemy import insert, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.statuses import JobStatus
from app.models.tables import JOBS
from app.services.upkeep.gauges import Gauges
from app.stores.jobs.portable import _claim_due as claim_due
from app.workers.jobs.worker import JobWorker
from tests.support import Api, make_job, trail, until_status, wait_for


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


async def test_a_delayed_job_is_scheduled_then_runs_once_after_its_delay(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("sched-delay")

    answer = await api.submit(headers, payload={"n": 2}, delay_seconds=2)

    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert job["status"] == "scheduled"
    assert when(job["run_at"]) - when(job["created_at"]) == timedelta(seconds=2)
    done = await until_status(api, headers, job["id"], 20)
    assert done["status"] == "succeeded" and done["result"] == {"n": 2}
    assert when(done["started_at"]) >= when(job["run_at"])
    events = await trail(api, headers, job["id"])
    assert [e["event"] for e in events] == ["created", "scheduled", "queued", "running", "succeeded"]
    assert events[1]["detail"] == {"from": "pending", "to": "scheduled", "attempt": 0}
    assert events[2]["detail"]["from"] == "scheduled"


async def test_a_cancelled_scheduled_job_never_runs_while_a_later_one_does(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("sched-cancel")
    first = (await api.submit(headers, payload={"n": 1}, delay_seconds=1)).json()
    later = (await api.submit(headers, payload={"n": 2}, delay_seconds=1.5)).json()

    cancelled = await api.client.post(f"/api/v1/jobs/{first['id']}/cancel", headers=headers)

    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert (await until_status(api, headers, later["id"], 20))["status"] == "succeeded"
    assert (await api.job(headers, first["id"]))["status"] == "cancelled"
    assert [e["event"] for e in await trail(api, headers, first["id"])] == ["created", "scheduled", "cancelled"]


async def test_run_at_in_the_past_runs_now_and_scheduled_jobs_are_listed(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("sched-list")
    past = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    future = (datetime.now(UTC) + timedelta(days=30)).isoformat()

    now = await api.submit(headers, run_at=past)
    waiting = await api.submit(headers, run_at=future)

    assert now.status_code == 201 and now.json()["status"] != "scheduled"
    assert (await until_status(api, headers, now.json()["id"], 20))["status"] == "succeeded"
    assert waiting.status_code == 201 and waiting.json()["status"] == "scheduled"
    listed = await api.client.get("/api/v1/jobs", params={"status": "scheduled"}, headers=headers)
    assert [j["id"] for j in listed.json()["items"]] == [waiting.json()["id"]]
    assert when(listed.json()["items"][0]["run_at"]) == when(future)
    cancel = await api.client.post(f"/api/v1/jobs/{waiting.json()['id']}/cancel", headers=headers)
    assert cancel.json()["status"] == "cancelled"


async def test_a_batch_may_schedule_some_items_and_run_others(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("sched-batch")
    jobs = [{"job_type": "echo", "payload": {"n": 0}}, {"job_type": "echo", "payload": {"n": 1}, "delay_seconds": 1}]

    answer = await api.client.post("/api/v1/jobs/batch", json={"jobs": jobs}, headers=headers)

    assert answer.status_code == 201, answer.text
    items = answer.json()["items"]
    assert [i["outcome"] for i in items] == ["created", "created"]
    assert items[1]["job"]["status"] == "scheduled"
    for item in items:
        assert (await until_status(api, headers, item["job"]["id"], 20))["status"] == "succeeded"


async def test_a_bad_time_is_a_422_that_names_the_field(api: Api) -> None:
    headers = await api.new_client("sched-bad")
    soon = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"run_at": soon, "delay_seconds": 5}, "not both"),
        ({"delay_seconds": 0}, "greater than 0"),
        ({"delay_seconds": 31_536_001}, "less than or equal"),
        ({"run_at": "2030-01-01T00:00:00"}, "timezone"),
    ]
    for fields, words in cases:
        answer = await api.submit(headers, **fields)
        assert answer.status_code == 422, (fields, answer.text)
        assert words in answer.text, (fields, answer.text)
    batch = {"jobs": [{"job_type": "echo", "payload": {}, "run_at": soon, "delay_seconds": 1}]}
    answer = await api.client.post("/api/v1/jobs/batch", json=batch, headers=headers)
    assert answer.status_code == 422
    assert answer.json()["errors"][0]["loc"][:3] == ["body", "jobs", 0]


def scheduled_jobs(n: int, due: datetime) -> list[dict[str, Any]]:
    return [
        make_job(status="scheduled", seq=1, next_attempt_at=due, run_at=due, client_id="claim-race") for _ in range(n)
    ]


async def _claim(engine: AsyncEngine, gate: asyncio.Event) -> set[str]:
    async with engine.begin() as conn:
        await gate.wait()
        rows = await conn.execute(claim_due(datetime.now(UTC), 200))
        return {row.id for row in rows}


async def test_two_schedulers_claiming_at_once_each_take_a_due_job_once(engine: AsyncEngine) -> None:
    due = datetime.now(UTC) - timedelta(seconds=1)
    jobs = scheduled_jobs(30, due)
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), jobs)
    gate = asyncio.Event()
    claims = [asyncio.create_task(_claim(engine, gate)) for _ in range(2)]
    await asyncio.sleep(0.05)
    gate.set()

    first, second = await asyncio.gather(*claims)

    ids = {job["id"] for job in jobs}
    assert first.isdisjoint(second)
    assert ids <= first | second
    async with engine.connect() as conn:
        statuses = set((await conn.execute(select(JOBS.c.status).where(JOBS.c.id.in_(ids)))).scalars())
    assert statuses == {JobStatus.QUEUED}
    async with engine.begin() as conn:
        await conn.execute(update(JOBS).where(JOBS.c.id.in_(ids)).values(status="cancelled"))


def test_the_claim_skips_rows_another_scheduler_holds_on_postgresql() -> None:
    sql = str(claim_due(datetime.now(UTC), 200).compile(dialect=postgresql.dialect()))
    assert "FOR UPDATE SKIP LOCKED" in sql and "RETURNING" in sql
    assert sql.count("jobs.status = ") == 2  # the inner SELECT's and the outer compare-and-set's


async def wait_queued(engine: AsyncEngine, job_id: str) -> bool:
    async with engine.connect() as conn:
        status = (await conn.execute(select(JOBS.c.status).where(JOBS.c.id == job_id))).scalar()
    return status != "scheduled"


async def test_a_job_a_month_away_is_queued_once_its_time_is_moved_near(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("sched-month")
    job = (await api.submit(headers, delay_seconds=30 * 24 * 3600)).json()
    assert job["status"] == "scheduled"

    async with db.begin() as conn:  # the test's way to make a month pass
        await conn.execute(update(JOBS).where(JOBS.c.id == job["id"]).values(next_attempt_at=datetime.now(UTC)))

    await wait_for(lambda: wait_queued(db, job["id"]), within=10)
    assert (await api.job(headers, job["id"]))["status"] in ("queued", "running", "succeeded")


async def test_the_scheduler_metrics_count_waiting_jobs_and_the_lag_of_queued_ones(api: Api, db: AsyncEngine) -> None:
    headers = await api.new_client("sched-metrics")
    lag = {"source": "run_at"}
    queued_before = REGISTRY.get_sample_value("scheduler_lag_seconds_count", lag) or 0
    waiting = (await api.submit(headers, delay_seconds=3600)).json()
    soon = (await api.submit(headers, delay_seconds=0.3)).json()

    await Gauges(api.app.state.api.resources).scheduled()

    assert (REGISTRY.get_sample_value("scheduled_jobs_waiting") or 0) >= 1
    await wait_for(lambda: wait_queued(db, soon["id"]), within=10)
    assert (REGISTRY.get_sample_value("scheduler_lag_seconds_count", lag) or 0) >= queued_before + 1
    await api.client.post(f"/api/v1/jobs/{waiting['id']}/cancel", headers=headers)
