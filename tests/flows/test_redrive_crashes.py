"""A redrive driven by a worker process killed with SIGKILL mid-way resumes in the next one and replays nothing
twice; two processes at once drive it at its pace, not twice that (issue 48: "a redrive interrupted by a SIGKILL
resumes and replays nothing twice"). Each test has a database and a namespace of its own, so no other process of
the session (an API, a shared service) can drive its redrive."""

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.database import make_engine
from app.core.statuses import RedriveKind
from app.models.tables import JOBS
from app.stores.redrives import NewRedrive, RedriveStore
from tests.api.test_redrives import replays_by
from tests.conftest import make_settings, settings_env, world_of_its_own
from tests.support import app_process, make_job, wait_for

pytestmark = pytest.mark.slow
CLIENT = "redrive-crash"


@asynccontextmanager
async def own_world(name: str) -> AsyncIterator[tuple[AsyncEngine, dict[str, str]]]:
    """A database and namespace of the test's own, its engine, and the environment of a worker process on it."""
    async with world_of_its_own(f"{name}{uuid.uuid4().hex[:6]}") as world:
        settings = make_settings(**world, log_level="INFO")  # a worker says when it consumes
        engine = make_engine(settings.database_url)
        try:
            yield engine, settings_env(settings)
        finally:
            await engine.dispose()


async def dead_jobs(db: AsyncEngine, n: int) -> list[str]:
    died = datetime.now(UTC) - timedelta(minutes=1)
    rows = [
        make_job(client_id=CLIENT, status="dead_lettered", finished_at=died + timedelta(milliseconds=i))
        for i in range(n)
    ]
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), rows)
    return [row["id"] for row in rows]


async def redrive_of(db: AsyncEngine, per_second: float) -> dict[str, Any]:
    new = NewRedrive(CLIENT, CLIENT, RedriveKind.JOBS, {"job_type": "echo"}, 1000, per_second)
    return await RedriveStore(db).create(new)


async def reading(db: AsyncEngine, redrive_id: str) -> dict[str, Any]:
    row = await RedriveStore(db).one(redrive_id, None)
    assert row is not None
    return row


async def test_a_redrive_killed_mid_way_resumes_in_the_next_process_and_replays_each_job_once(
    tmp_path: Path,
) -> None:
    async with own_world("redrivekill") as (db, env):
        ids = await dead_jobs(db, 60)
        redrive = await redrive_of(db, per_second=20)
        assert redrive["total"] == 60
        with app_process(["worker", "jobs"], env, tmp_path / "a.log") as first:

            async def under_way() -> bool:
                return (await reading(db, redrive["id"]))["replayed"] >= 10

            await wait_for(under_way, within=40)
            first.kill()
        killed = await reading(db, redrive["id"])
        assert 0 < killed["replayed"] < 60 and killed["status"] == "running", first.output()
        assert killed["lease_owner"] is not None  # the dead process's lease: the next one waits for it to end
        with app_process(["worker", "jobs"], env, tmp_path / "b.log") as second:

            async def finished() -> dict[str, Any] | None:
                row = await reading(db, redrive["id"])
                return row if row["status"] == "finished" else None

            done = await wait_for(finished, within=60)
            assert (done["replayed"], done["skipped"], done["reached"]) == (60, 0, 60), second.output()
        assert await replays_by(db, redrive["id"]) == dict.fromkeys(ids, 1)
        async with db.connect() as conn:
            still_dead = select(func.count()).where(JOBS.c.status == "dead_lettered")
            assert (await conn.execute(still_dead)).scalar() == 0


async def test_two_processes_drive_a_redrive_at_its_pace_not_twice_it(tmp_path: Path) -> None:
    async with own_world("redrivetwo") as (db, env):
        ids = await dead_jobs(db, 30)
        with (
            app_process(["worker", "jobs"], env, tmp_path / "a.log") as first,
            app_process(["worker", "jobs"], env, tmp_path / "b.log") as second,
        ):

            async def both_up() -> bool:  # their loops start before their consumers
                return all("consuming" in process.output() for process in (first, second))

            try:
                await wait_for(both_up, within=40)
            except AssertionError as exc:
                raise AssertionError(f"{first.output()}\n---\n{second.output()}") from exc
            redrive = await redrive_of(db, per_second=10)

            async def finished() -> dict[str, Any] | None:
                row = await reading(db, redrive["id"])
                return row if row["status"] == "finished" else None

            done = await wait_for(finished, within=60)
        assert done["finished_at"] - done["created_at"] >= timedelta(seconds=2.85)  # 29 gaps of 0.1 s
        assert await replays_by(db, redrive["id"]) == dict.fromkeys(ids, 1)
