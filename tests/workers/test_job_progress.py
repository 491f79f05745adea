"""Progress reports on PostgreSQL and SQLite, and rendered for MSSQL: many running jobs' reports written by one
statement behind each run's fencing token; a run's reports written at most once a second, its last one kept for
its outcome."""

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, insert, select
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker
from app.core.messages import loads
from app.core.names import Names
from app.core.topology import build_topology
from app.handlers.base import JobContext
from app.models.rows import JobRow, job_row
from app.models.tables import JOBS
from app.stores.jobs import JobStore
from app.stores.jobs.progress import progress_update
from app.workers.jobs.outcomes import succeeded, with_last_report
from app.workers.jobs.progress import Progress
from tests.conftest import NS, RABBITMQ_URL, make_settings
from tests.support import make_job, stores_for, wait_for

REPORT = {"fraction": 0.25, "message": "a quarter", "updated_at": "2026-12-07T03:00:00+00:00"}


def store(engine: AsyncEngine) -> JobStore:
    return stores_for(engine, Names(NS)).jobs


async def running(engine: AsyncEngine, **overrides: Any) -> JobRow:
    job = make_job(**{"status": "running", "attempts": 1, "runs": 1, "seq": 2, **overrides})
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), [job])
    return job_row(job)


async def progress_of(engine: AsyncEngine, job_id: str) -> Any:
    async with engine.connect() as conn:
        return (await conn.execute(select(JOBS.c.progress).where(JOBS.c.id == job_id))).scalar_one()


def counting_updates(engine: AsyncEngine) -> list[str]:
    """The UPDATE statements sent on `engine` from now on."""
    sent: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE"):
            sent.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    return sent


@pytest.fixture
async def publisher() -> AsyncIterator[Broker]:
    broker = Broker(RABBITMQ_URL, build_topology(make_settings()), 5, name="test-progress")
    await broker.start(wait=10)
    try:
        yield broker
    finally:
        await broker.close()


async def test_many_jobs_progress_is_one_statement_behind_each_runs_token(engine: AsyncEngine) -> None:
    ours, other = await running(engine), await running(engine)
    newer = await running(engine, runs=2)  # a newer run owns it: the report of run 1 is fenced out
    done = await running(engine, status="succeeded")
    updates = counting_updates(engine)
    second = {**REPORT, "fraction": 0.5, "message": None}
    reports = {ours["id"]: (1, REPORT), other["id"]: (1, second), newer["id"]: (1, REPORT), done["id"]: (1, REPORT)}
    assert await store(engine).progress(reports) == {ours["id"], other["id"]}
    assert len(updates) == 1
    assert await progress_of(engine, ours["id"]) == REPORT
    assert await progress_of(engine, other["id"]) == second
    assert await progress_of(engine, newer["id"]) is None
    assert await progress_of(engine, done["id"]) is None


async def test_the_last_report_is_recorded_with_the_outcome_and_a_quiet_run_keeps_what_was_there(
    engine: AsyncEngine,
) -> None:
    reported, quiet = await running(engine), await running(engine, progress=REPORT)  # an earlier run's report
    last = {**REPORT, "fraction": 1.0, "message": "done"}
    outcomes = [succeeded(with_last_report(reported, last), {"n": 1}), succeeded(with_last_report(quiet, None), 2)]
    recorded = (await store(engine).finish(outcomes)).recorded
    assert await progress_of(engine, reported["id"]) == last
    assert await progress_of(engine, quiet["id"]) == REPORT
    events = [loads(staged.message.body) for staged in recorded if staged is not None]
    assert [event["data"]["job"]["progress"] for event in events] == [last, REPORT]  # the job.succeeded events


def test_the_progress_write_renders_for_mssql_with_output_instead_of_returning() -> None:
    rendered = str(
        progress_update({"a": (1, REPORT), "b": (2, {**REPORT, "fraction": 1.0})}).compile(
            dialect=mssql.dialect(), compile_kwargs={"render_postcompile": True}
        )
    )
    assert rendered.startswith("UPDATE jobs SET progress=CASE jobs.id")
    assert "OUTPUT inserted.id" in rendered and "RETURNING" not in rendered
    assert "jobs.runs = CASE jobs.id" in rendered


async def test_a_runs_reports_are_written_at_most_once_a_second_and_the_last_is_kept(
    engine: AsyncEngine, publisher: Broker
) -> None:
    job = await running(engine)
    progress = Progress(store(engine), publisher, Names(NS))
    ctx = JobContext(job["id"], job["job_type"], 1, 1, None, progress_sink=progress.sink(job))
    started = time.monotonic()
    for step in range(1, 51):  # 50 reports in about half a second
        await ctx.progress(step / 100, f"step {step}")
        await asyncio.sleep(0.01)
    assert time.monotonic() - started < 1  # still within the first second: only the first report was written
    await wait_for(lambda: _value(progress_of(engine, job["id"]), "fraction", 0.01), within=5)
    assert progress.writes.items == 1
    await wait_for(lambda: _value(progress_of(engine, job["id"]), "fraction", 0.5), within=5)
    assert progress.writes.items == 2  # the latest report, once the second was up
    assert time.monotonic() - started >= 1
    assert (await progress_of(engine, job["id"]))["message"] == "step 50"

    await ctx.progress(0.75, "nearly")  # the third write would wait for its second: the run ends first
    last = progress.ended(job)
    await progress.close()
    assert progress.writes.items == 2
    assert last is not None and (last["fraction"], last["message"]) == (0.75, "nearly")
    outcome = succeeded(with_last_report(job, last), {"ok": True})
    assert outcome.values["progress"] == last  # the finish records it with the result
    assert progress.ended(job) is None  # nothing more of that run


async def _value(read: Any, key: str, expected: Any) -> bool:
    got = await read
    return got is not None and got[key] == expected


@pytest.mark.parametrize("fraction", [-0.1, 1.5, float("nan"), True, "half"])
async def test_a_fraction_out_of_range_is_refused_with_a_clear_error(fraction: Any) -> None:
    reports: list[tuple[float, str | None]] = []
    ctx = JobContext("j", "echo", 1, 1, None, progress_sink=lambda f, m: reports.append((f, m)))
    with pytest.raises(ValueError, match="fraction from 0 to 1"):
        await ctx.progress(fraction)
    await ctx.progress(1, "x" * 600)
    assert reports == [(1.0, "x" * 500)]
