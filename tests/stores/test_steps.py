"""Every status change is a step guarded by the transition table: each step's sources are moves the table allows,
the PostgreSQL statements carry their step's guard, no module outside the stores writes `jobs.status`, and each
store method that changes a status moves a job from exactly its step's sources and from no other status."""

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import Names
from app.core.statuses import TRANSITIONS, JobStatus
from app.models.rows import JobRow
from app.models.tables import JOBS
from app.stores import steps
from app.stores.jobs import JobStore, Outcome
from app.stores.jobs.moves import Change
from app.stores.jobs.postgres_sql import CLAIM_RECORDED, FINISH_RECORDED, QUEUE_RECORDED
from tests.conftest import NS
from tests.support import make_job, stores_for

S = JobStatus
APP = Path(__file__).resolve().parents[2] / "app"


def test_every_step_moves_only_as_the_transition_table_allows() -> None:
    for step in steps.STEPS:
        assert step.sources, step
        assert all(step.target in TRANSITIONS[source] for source in step.sources), step
    with pytest.raises(ValueError, match="does not allow"):
        steps.step("backwards", S.PENDING, S.SUCCEEDED)
    # Cancelled at once from every status that may reach it but running, whose worker stops it first.
    reach_cancelled = {s for s, targets in TRANSITIONS.items() if S.CANCELLED in targets}
    assert set(steps.CANCEL.sources) == reach_cancelled - {S.RUNNING}
    assert steps.STOP.sources == (S.RUNNING,) and steps.FINISHES[S.CANCELLED] is steps.STOP


def test_the_postgresql_statements_carry_their_steps_guards() -> None:
    assert steps.CLAIM.sql_guard() in CLAIM_RECORDED
    assert QUEUE_RECORDED.count(steps.QUEUE.sql_guard()) == 2  # the locking read and the compare-and-set
    assert all(step.sql_guard() in FINISH_RECORDED for step in steps.FINISHES.values())


def test_no_module_outside_the_stores_writes_a_jobs_status() -> None:
    writes = re.compile(r"update\(JOBS\)(?:(?!\n\n).)*?\.values\([^)]*\bstatus=|UPDATE jobs SET status", re.S)
    offenders = [
        str(path.relative_to(APP))
        for path in APP.rglob("*.py")
        if "stores" not in path.relative_to(APP).parts and writes.search(path.read_text())
    ]
    assert offenders == []


PAST = datetime.now(UTC) - timedelta(minutes=5)
Call = Callable[[JobStore, JobRow], Awaitable[Any]]


async def _in_transaction(jobs: JobStore, work: Callable[[AsyncConnection], Awaitable[Any]]) -> Any:
    async with jobs.transaction() as conn:
        return await work(conn)


def _finish(to: JobStatus) -> Call:
    values = {"error": None, "finished_at": PAST, "next_attempt_at": PAST, "dead_reason": None, "result": None}
    return lambda jobs, job: jobs.finish([Outcome(job, to, values, {})])


BURIED = {"error": {"type": "X", "message": "x"}, "dead_reason": "unprocessable", "finished_at": PAST}
# Each store method that changes a status, the step it makes, and how to ask it to move one job as read.
METHODS: dict[str, tuple[steps.Step, Call]] = {
    "queue_published": (
        steps.QUEUE,
        lambda jobs, job: _in_transaction(jobs, lambda c: jobs.queue_published(c, [job["id"]], [])),
    ),
    "claim": (steps.CLAIM, lambda jobs, job: jobs.claim([job["id"]])),
    "take_over": (
        steps.TAKE_OVER,
        lambda jobs, job: _in_transaction(jobs, lambda c: jobs.take_over(c, [Change(job)], ())),
    ),
    "bury": (steps.BURY, lambda jobs, job: _in_transaction(jobs, lambda c: jobs.bury(c, [Change(job, BURIED)]))),
    "give_up": (steps.BURY, lambda jobs, job: jobs.give_up(job["id"], BURIED, {})),
    "give_up_bare": (steps.BURY, lambda jobs, job: jobs.give_up_bare(job["id"], BURIED)),
    "finish succeeded": (steps.SUCCEED, _finish(S.SUCCEEDED)),
    "finish retrying": (steps.RETRY, _finish(S.RETRYING)),
    "finish dead_lettered": (steps.FAIL, _finish(S.DEAD_LETTERED)),
    "finish cancelled": (steps.STOP, _finish(S.CANCELLED)),
    "stop": (steps.STOP, lambda jobs, job: _in_transaction(jobs, lambda c: jobs.stop(c, [Change(job)], ()))),
    "queue_due": (steps.QUEUE_DUE, lambda jobs, job: jobs.queue_due(datetime.now(UTC), 100)),
    "replay": (steps.REPLAY, lambda jobs, job: _in_transaction(jobs, lambda c: jobs.replay(c, job))),
    "cancel": (steps.CANCEL, lambda jobs, job: _in_transaction(jobs, lambda c: jobs.cancel(c, job))),
}


async def test_each_store_method_moves_a_job_from_its_steps_sources_and_from_nothing_else(engine: AsyncEngine) -> None:
    jobs = stores_for(engine, Names(NS)).jobs
    wrong: list[str] = []
    for name, (step, call) in METHODS.items():
        for status in JobStatus:
            job = make_job(status=str(status), next_attempt_at=PAST, lease_until=PAST, run_at=PAST, sealed=None)
            async with engine.begin() as conn:
                await conn.execute(insert(JOBS), [job])
            await call(jobs, job)  # type: ignore[arg-type]
            async with engine.connect() as conn:
                after = (await conn.execute(select(JOBS.c.status, JOBS.c.seq).where(JOBS.c.id == job["id"]))).one()
            moved = after.seq > 0 and after.status == step.target
            if moved != (status in step.sources):
                wrong.append(f"{name} from {status}: {'moved' if moved else 'stayed'}")
    assert wrong == []
