"""The scheduler across real processes: a job scheduled a minute away outlives every process being killed and
runs once; three scheduler processes make one job per firing of an every-second schedule."""

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.main import create_app
from app.models.tables import JOBS
from tests.api.test_schedules import SCHEDULES_URL, firings, schedule
from tests.api.test_workers_api import entries, name_of
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.support import Api, Process, api_with, app_process, env_without_dotenv, trail, until_status, wait_for

pytestmark = pytest.mark.slow


@contextlib.asynccontextmanager
async def api_without_scheduler() -> AsyncIterator[Api]:
    """The API in this process, running no scheduler of its own: only the worker processes schedule."""
    async with api_with(create_app(make_settings(scheduler_enabled=False)), ADMIN_KEY) as api:
        yield api


def worker_env() -> dict[str, str]:
    return env_without_dotenv(settings_env(make_settings(metrics_port=0)))


async def until_scheduling(api: Api, *processes: Process) -> None:
    """Until each process lists a running scheduler that has finished a cycle."""

    async def running() -> bool:
        answer = await api.client.get("/api/v1/workers/scheduler", headers=api.admin)
        if answer.status_code == 404:  # no process has reported it yet
            return False
        found = {entry["process"]: entry for entry in answer.json()["items"]}
        return all(
            found.get(name_of(p), {}).get("state") == "running" and found[name_of(p)]["processed"] > 0
            for p in processes
        )

    await wait_for(running, within=30, interval=0.2)


async def status_of(db: AsyncEngine, job_id: str) -> str | None:
    async with db.connect() as conn:
        return (await conn.execute(select(JOBS.c.status).where(JOBS.c.id == job_id))).scalar()


async def test_a_job_a_minute_away_outlives_every_process_and_runs_once(tmp_path: Path, db: AsyncEngine) -> None:
    async with api_without_scheduler() as api:
        headers = await api.new_client("sched-restart")
        run_at = datetime.now(UTC) + timedelta(minutes=1)
        job = (await api.submit(headers, run_at=run_at.isoformat())).json()
        assert job["status"] == "scheduled"
        with app_process(["worker", "jobs"], worker_env(), tmp_path / "first.log") as first:
            await until_scheduling(api, first)
            first.kill()
    assert await status_of(db, job["id"]) == "scheduled"
    async with db.begin() as conn:  # the test's way to let the minute pass while everything is down
        await conn.execute(update(JOBS).where(JOBS.c.id == job["id"]).values(next_attempt_at=datetime.now(UTC)))

    async with api_without_scheduler() as api:
        with app_process(["worker", "jobs"], worker_env(), tmp_path / "second.log") as second:
            done = await until_status(api, headers, job["id"], 30)
            assert done["status"] == "succeeded", second.output()
        events = [e["event"] for e in await trail(api, headers, job["id"])]
    assert events == ["created", "scheduled", "queued", "running", "succeeded"]


async def test_three_scheduler_processes_make_one_job_per_firing(tmp_path: Path, db: AsyncEngine) -> None:
    async with api_without_scheduler() as api:
        headers = await api.new_client("sched-three")
        with contextlib.ExitStack() as stack:
            processes = [
                stack.enter_context(app_process(["worker", "jobs"], worker_env(), tmp_path / f"w{n}.log"))
                for n in range(3)
            ]
            await until_scheduling(api, *processes)
            body = schedule(cron="* * * * * *", timezone="UTC")
            made = (await api.client.post(SCHEDULES_URL, json=body, headers=headers)).json()

            async def six_firings() -> list[str] | None:
                keys = await firings(db, made["id"])
                return keys if len(keys) >= 6 else None

            await wait_for(six_firings, within=30, interval=0.2)
            await api.client.delete(f"{SCHEDULES_URL}/{made['id']}", headers=headers)
            schedulers = await entries(api, "scheduler")
            assert [schedulers[name_of(p)]["failed"] for p in processes] == [0, 0, 0]
            keys = await firings(db, made["id"])
            async with db.connect() as conn:
                query = select(func.count()).where(JOBS.c.idempotency_key.in_(keys))
                assert (await conn.execute(query)).scalar() == len(keys) == len(set(keys))
            for job_id in await _ids(db, keys):  # while the worker processes still run: they are the only ones
                assert (await until_status(api, headers, job_id, 30))["status"] == "succeeded"


async def _ids(db: AsyncEngine, keys: list[str]) -> list[str]:
    async with db.connect() as conn:
        return list((await conn.execute(select(JOBS.c.id).where(JOBS.c.idempotency_key.in_(keys)))).scalars())
