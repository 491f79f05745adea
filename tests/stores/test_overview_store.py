"""The overview's statements on PostgreSQL and SQLite: the minute and hour buckets are the same integers Python
computes, and the counts group by status and type."""

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import JOBS
from app.stores import overview as figures
from tests.support import make_job


async def test_buckets_and_counts_read_alike_on_every_dialect(engine: AsyncEngine) -> None:
    client, at = f"ov-{uuid.uuid4().hex[:8]}", datetime(2026, 12, 7, 5, 59, 59, 900000, tzinfo=UTC)
    rows = [
        make_job(at, client_id=client, status="succeeded", started_at=at, finished_at=at, run_at=None),
        make_job(at, client_id=client, status="dead_lettered", started_at=at, finished_at=at, run_at=None),
        make_job(at, client_id=client, status="succeeded", started_at=at, finished_at=at + timedelta(seconds=1)),
        make_job(at, client_id=client, status="queued", job_type="document", run_at=None),
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), [{"run_at": None, **row} for row in rows])
    minute = int(at.timestamp()) // 60
    since = at - timedelta(minutes=5)
    async with engine.connect() as conn:
        finished = sorted(tuple(r) for r in await figures.finished_per_minute(conn, client, since))
        submitted = [tuple(r) for r in await figures.submitted_per_minute(conn, client, since)]
        dead = [tuple(r) for r in await figures.dead_per_hour(conn, client, since)]
        counts = sorted(tuple(r) for r in await figures.status_type_counts(conn, client))
        runs = await figures.latest_runs(conn, client, "echo", since, 2)
    assert finished == [("dead_lettered", minute, 1), ("succeeded", minute, 1), ("succeeded", minute + 1, 1)]
    assert submitted == [(minute, 4)]
    assert dead == [(int(at.timestamp()) // 3600, 1)]
    assert counts == [("dead_lettered", "echo", 1), ("queued", "document", 1), ("succeeded", "echo", 2)]
    assert [r.finished_at for r in runs] == [at + timedelta(seconds=1), at]
