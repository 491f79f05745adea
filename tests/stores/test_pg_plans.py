"""The job path's batch statements on PostgreSQL find their jobs by primary key, whatever the planner's statistics
say. Without statistics (a table never analysed, or analysed before a burst) the planner takes `status =
'pending'` for a rare value and reads the status index instead; but every job that moved on from pending leaves
a dead entry there until a vacuum, so that read grows with every job submitted since: at 33,000 such entries
the confirmation's pending -> queued step read 1,127 buffers for 32 jobs, against 102 by primary key."""

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import JOBS
from app.stores.jobs import holds, postgres_sql
from tests.support import make_job

MOVED_ON = 3000  # jobs queued since they were pending: dead entries of the status index's 'pending'
ASKED = 32


def index_names(plan: Any) -> set[str]:
    """Every index a plan (EXPLAIN's JSON, any depth) reads."""
    if isinstance(plan, list):
        return set().union(*(index_names(item) for item in plan))
    if not isinstance(plan, dict):
        return set()
    found = {plan["Index Name"]} if "Index Name" in plan else set()
    return found.union(*(index_names(value) for value in plan.values()))


async def plan_of(db: AsyncEngine, sql: str, *params: Any) -> set[str]:
    async with db.connect() as conn:
        result = await conn.exec_driver_sql("EXPLAIN (FORMAT JSON) " + sql, params)
        document = result.scalar_one()
    return index_names(json.loads(document) if isinstance(document, str) else document)


async def jobs_among_moved_ones(db: AsyncEngine, status: str, moved_to: str) -> list[str]:
    """ASKED jobs in `status`, beside MOVED_ON that were in it and moved on to `moved_to`."""
    moved = [make_job(status=status) for _ in range(MOVED_ON)]
    asked = [make_job(status=status) for _ in range(ASKED)]
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), moved + asked)
        await conn.execute(update(JOBS).where(JOBS.c.id.in_([j["id"] for j in moved])).values(status=moved_to))
    return [job["id"] for job in asked]


async def test_the_confirmations_queue_step_reads_jobs_by_primary_key(db: AsyncEngine) -> None:
    ids = await jobs_among_moved_ones(db, "pending", "queued")
    read = await plan_of(db, postgres_sql.QUEUE_RECORDED, ids, datetime.now(UTC), "events", [1, 2])
    assert "pk_jobs" in read
    assert "ix_jobs_status_next" not in read


async def test_the_claim_reads_jobs_by_primary_key(db: AsyncEngine) -> None:
    ids = await jobs_among_moved_ones(db, "pending", "queued")
    now = datetime.now(UTC)
    read = await plan_of(db, postgres_sql.CLAIM_RECORDED, ids, now + timedelta(seconds=30), now, "events")
    assert "pk_jobs" in read
    assert "ix_jobs_status_next" not in read


async def test_the_finish_reads_jobs_by_primary_key(db: AsyncEngine) -> None:
    ids = await jobs_among_moved_ones(db, "running", "succeeded")
    now, n = datetime.now(UTC), len(ids)
    outcomes = [ids, [2] * n, [1] * n, ["succeeded"] * n, ["{}"] * n, [None] * n, [None] * n, [now] * n, [None] * n]
    trail = [["succeeded"] * n, ['{"from": "running", "to": "succeeded", "attempt": 1}'] * n]
    events = [["events"] * n, ["job.echo.succeeded"] * n, [b"{}"] * n, ["{}"] * n, [None] * n, ids]
    progress = [[None] * n]  # no run reported: each keeps its column as it is
    groups = [[None] * n]  # none dead: no failure group
    read = await plan_of(db, postgres_sql.FINISH_RECORDED, now, *outcomes, *trail, *events, *progress, *groups)
    assert "pk_jobs" in read
    assert "ix_jobs_status_next" not in read


async def test_the_release_finds_held_jobs_by_the_held_index_without_reading_a_paused_types(db: AsyncEngine) -> None:
    """Millions of jobs may wait under a paused type: the release's read, every second in every process, asks
    for the resumed types' held jobs alone, which the partial index finds without a look at the paused one's."""
    paused, resumed = f"plan-paused-{MOVED_ON}", f"plan-resumed-{ASKED}"
    held = [make_job(job_type=paused, status="queued", held="paused") for _ in range(MOVED_ON)]
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), held + [make_job() for _ in range(MOVED_ON)])
        await conn.exec_driver_sql("ANALYZE jobs")
    query = select(JOBS.c.id).where(holds.released([resumed])).limit(1)
    sql = str(query.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    assert await plan_of(db, sql) == {"ix_jobs_held"}
