"""Retention of finished jobs: jobs finished long ago go with their audit rows, deliveries, attempts, artifacts and
DLQ messages, in batches, counted in `jobs_pruned_total`; unfinished and recent ones stay, and 0 keeps them all."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import func, insert, select, text, update
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.database import make_engine
from app.core.resources import Resources
from app.core.statuses import JobStatus
from app.models.tables import (
    ARTIFACTS,
    ATTEMPTS,
    DELIVERIES,
    JOB_EVENTS,
    JOBS,
    REDRIVE_EVENTS,
    REDRIVE_ITEMS,
    REDRIVES,
)
from app.services.upkeep.retention import Retention, delete_finished, finished_before
from app.stores.artifacts.sql import SqlArtifacts
from app.workers.jobs.worker import JobWorker
from tests.conftest import make_settings, world_of_its_own
from tests.services.test_dlq import dlq_ids
from tests.stores.test_pg_plans import plan_of
from tests.support import Api, BrokerProbe, make_delivery, make_job, until_status, wait_for

S = JobStatus
NOW = datetime.now(UTC)
LIFETIMES = {S.SUCCEEDED: 30.0, S.CANCELLED: 30.0, S.DEAD_LETTERED: 90.0}
UNFINISHED = [S.PENDING, S.SCHEDULED, S.QUEUED, S.RUNNING, S.RETRYING]


@pytest.fixture
def settings() -> Settings:
    """The API's and worker's: their own retention loops prune no job, so only the test's sweeps do."""
    return make_settings(job_retention_days=0, dead_job_retention_days=0)


def pruned_so_far(status: str) -> float:
    return REGISTRY.get_sample_value("jobs_pruned_total", {"status": status}) or 0.0


async def a_finished_job(engine: AsyncEngine, status: S, days_ago: float, artifact: Path | None = None) -> str:
    """A job of `status` with three audit rows, a delivery with two attempts and an artifact, all written
    `days_ago` days ago; an unfinished one has no finish time however old it is."""
    at = NOW - timedelta(days=days_ago)
    finished = at if status in LIFETIMES else None
    job = make_job(at, status=str(status), finished_at=finished)
    delivery = f"msg_{uuid.uuid4().hex}"
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS).values(**job))
        for event in ("created", "queued", "running"):
            await conn.execute(insert(JOB_EVENTS).values(job_id=job["id"], event=event, detail={}, created_at=at))
        await conn.execute(insert(DELIVERIES).values(**make_delivery(delivery, job["id"], job["client_id"], at)))
        for n in (1, 2):
            attempt = {"delivery_id": delivery, "attempt": n, "status_code": 500, "duration_ms": 1.0, "created_at": at}
            await conn.execute(insert(ATTEMPTS).values(**attempt))
        await conn.execute(insert(ARTIFACTS).values(**an_artifact(job, at, artifact)))
    return str(job["id"])


def an_artifact(job: dict[str, Any], at: datetime, path: Path | None) -> dict[str, Any]:
    if path is not None:
        path.write_bytes(b"%PDF-1.4")
    return {
        "job_id": job["id"],
        "client_id": job["client_id"],
        "content_type": "application/pdf",
        "filename": "report.pdf",
        "size": 8,
        "sha256": "0" * 64,
        "data": None if path else b"%PDF-1.4",
        "path": str(path) if path else None,
        "created_at": at,
    }


async def what_is_left(engine: AsyncEngine, ids: list[str]) -> dict[str, dict[str, int]]:
    """Per job id: its rows left in each table (a job with none left is absent)."""
    tables = {"jobs": (JOBS, JOBS.c.id), "events": (JOB_EVENTS, JOB_EVENTS.c.job_id)}
    tables |= {"deliveries": (DELIVERIES, DELIVERIES.c.job_id), "artifacts": (ARTIFACTS, ARTIFACTS.c.job_id)}
    left: dict[str, dict[str, int]] = {}
    async with engine.connect() as conn:
        for name, (table, key) in tables.items():
            counted = select(key, func.count()).select_from(table).where(key.in_(ids)).group_by(key)
            for job_id, n in await conn.execute(counted):
                left.setdefault(job_id, {})[name] = n
        attempts = (
            select(DELIVERIES.c.job_id, func.count())
            .join(ATTEMPTS, ATTEMPTS.c.delivery_id == DELIVERIES.c.id)
            .where(DELIVERIES.c.job_id.in_(ids))
            .group_by(DELIVERIES.c.job_id)
        )
        for job_id, n in await conn.execute(attempts):
            left[job_id]["attempts"] = n
    return left


WHOLE = {"jobs": 1, "events": 3, "deliveries": 1, "attempts": 2, "artifacts": 1}


async def test_jobs_finished_long_ago_go_with_everything_theirs_and_the_others_stay(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    file = tmp_path / "old.pdf"
    old = [
        await a_finished_job(engine, S.SUCCEEDED, 31, artifact=file),
        await a_finished_job(engine, S.SUCCEEDED, 400),
        await a_finished_job(engine, S.CANCELLED, 45),
        await a_finished_job(engine, S.DEAD_LETTERED, 91),
        await a_finished_job(engine, S.SUCCEEDED, 60),
    ]
    kept = [
        await a_finished_job(engine, S.SUCCEEDED, 29),
        await a_finished_job(engine, S.CANCELLED, 1),
        await a_finished_job(engine, S.DEAD_LETTERED, 60),  # older than 30 days, younger than 90
        *[await a_finished_job(engine, status, 400) for status in UNFINISHED],
    ]
    before = {status: pruned_so_far(status) for status in LIFETIMES}

    rows = SqlArtifacts(engine)
    retention = Retention(
        engine, delivery_days=1000, job_days=1000, batch_size=2, artifact_rows=rows, job_lifetimes=LIFETIMES
    )
    sweep = await retention.sweep(NOW)

    assert await what_is_left(engine, old + kept) == {job_id: WHOLE for job_id in kept}
    assert not file.exists()
    # Other tests' jobs in the shared database may go too: never fewer than ours, always what the counter says.
    assert sweep.pruned[S.SUCCEEDED] >= 3 and sweep.pruned[S.CANCELLED] >= 1 and sweep.pruned[S.DEAD_LETTERED] >= 1
    assert {status: pruned_so_far(status) - before[status] for status in LIFETIMES} == sweep.pruned
    assert sweep.batches >= 2 + 1 + 1  # at most two jobs per transaction


async def test_a_lifetime_of_zero_keeps_finished_jobs_forever(engine: AsyncEngine) -> None:
    ids = [await a_finished_job(engine, status, 3650) for status in LIFETIMES]

    forever = dict.fromkeys(LIFETIMES, 0.0)
    rows = SqlArtifacts(engine)
    sweep = await Retention(engine, 10**5, 10**5, batch_size=10, artifact_rows=rows, job_lifetimes=forever).sweep(NOW)

    assert await what_is_left(engine, ids) == {job_id: WHOLE for job_id in ids}
    assert sweep.pruned == {}


async def a_redrive(engine: AsyncEngine, status: str, days_ago: float) -> str:
    """A redrive of `status` created, and (once ended) ended, `days_ago` days ago, with two history rows and an
    item left (an ended redrive's items are gone already; one is left here to show retention takes it too)."""
    at, redrive_id = NOW - timedelta(days=days_ago), str(uuid.uuid4())
    ended = at if status in ("finished", "cancelled") else None
    row = {
        "id": redrive_id,
        "client_id": "retained",
        "created_by": "retained",
        "kind": "jobs",
        "selection": {"job_type": "flaky"},
        "max_items": 10,
        "per_second": 1.0,
        "status": status,
        "total": 1,
        "replayed": 0,
        "skipped": 0,
        "reached": 0,
        "created_at": at,
        "updated_at": at,
        "finished_at": ended,
    }
    async with engine.begin() as conn:
        await conn.execute(insert(REDRIVES).values(**row))
        for event in ("created", status):
            await conn.execute(insert(REDRIVE_EVENTS).values(redrive_id=redrive_id, event=event, created_at=at))
        await conn.execute(insert(REDRIVE_ITEMS).values(redrive_id=redrive_id, seq=1, item_id="a-job"))
    return redrive_id


async def redrive_rows_left(engine: AsyncEngine, ids: list[str]) -> dict[str, tuple[int, int, int]]:
    """Per redrive: (its row, history rows, items) left, for those with any left."""
    left: dict[str, tuple[int, int, int]] = {}
    async with engine.connect() as conn:
        for redrive_id in ids:
            keys = (REDRIVES.c.id, REDRIVE_EVENTS.c.redrive_id, REDRIVE_ITEMS.c.redrive_id)
            counts = [(await conn.execute(select(func.count()).where(key == redrive_id))).scalar_one() for key in keys]
            if any(counts):
                left[redrive_id] = (counts[0], counts[1], counts[2])
    return left


async def test_redrives_ended_long_ago_go_with_their_history_and_live_ones_stay(engine: AsyncEngine) -> None:
    old = [await a_redrive(engine, "finished", 31), await a_redrive(engine, "cancelled", 400)]
    kept = [
        await a_redrive(engine, "finished", 29),
        await a_redrive(engine, "running", 400),  # however old, a redrive that has not ended is kept
        await a_redrive(engine, "paused", 400),
    ]
    rows = SqlArtifacts(engine)
    retention = Retention(engine, 1000, 1000, batch_size=1, artifact_rows=rows, redrive_days=30)

    sweep = await retention.sweep(NOW)

    assert await redrive_rows_left(engine, old + kept) == dict.fromkeys(kept, (1, 2, 1))
    assert sweep.deleted["redrives"] >= 2  # other tests' old redrives in the shared database may go too
    forever = Retention(engine, 1000, 1000, batch_size=1, artifact_rows=rows)  # redrive_days 0: kept
    assert "redrives" not in (await forever.sweep(NOW)).deleted


def test_the_pruning_statements_render_for_mssql() -> None:
    found = str(finished_before(S.SUCCEEDED, NOW, 500).compile(dialect=mssql.dialect()))
    deleted = str(delete_finished(["a", "b"], S.SUCCEEDED, NOW).compile(dialect=mssql.dialect()))

    assert found.startswith("SELECT TOP") and "FOR UPDATE" not in found and "LIMIT" not in found
    assert deleted.startswith("DELETE FROM jobs OUTPUT deleted.id WHERE") and "RETURNING" not in deleted


async def test_on_postgresql_the_scan_for_old_jobs_reads_the_finish_time_index() -> None:
    # A database of its own: the plan follows the table's statistics, which other tests' rows would change.
    async with world_of_its_own("retention-plan") as world:
        db = make_engine(world["database_url"])
        try:
            await scan_reads_the_finish_time_index(db)
        finally:
            await db.dispose()


async def scan_reads_the_finish_time_index(db: AsyncEngine) -> None:
    # Recent jobs of every finished status, the dead ones in a failure group as they are once dead-lettered: each
    # of the other partial indexes that covers a finished status then holds rows too, as it does in production.
    recent = [
        make_job(status=status, finished_at=NOW - timedelta(minutes=n), **group)
        for status, group in (
            ("succeeded", {}),
            ("cancelled", {}),
            ("dead_lettered", {"failure_group": "0123456789abcdef"}),
        )
        for n in range(2000)
    ]
    unfinished = [make_job(status="queued") for _ in range(2000)]
    async with db.begin() as conn:
        await conn.execute(insert(JOBS), recent + unfinished)
    async with db.connect() as conn:
        await conn.execute(text("ANALYZE jobs"))

    for status, days in LIFETIMES.items():
        compiled = finished_before(status, NOW - timedelta(days=days), 1000).compile(dialect=db.dialect)
        params = [compiled.params[name] for name in compiled.positiontup or []]
        assert await plan_of(db, str(compiled), *params) == {"ix_jobs_status_finished"}


@pytest.fixture
async def resources() -> AsyncIterator[Resources]:
    opened = await Resources.open(make_settings(), role="test-retention")
    try:
        yield opened
    finally:
        await opened.close()


async def finish_long_ago(db: AsyncEngine, job_id: str, days: float) -> None:
    async with db.begin() as conn:
        await conn.execute(update(JOBS).where(JOBS.c.id == job_id).values(finished_at=NOW - timedelta(days=days)))


async def test_a_pruned_job_answers_404_and_a_dead_ones_dlq_message_goes_with_it(
    api: Api, worker: JobWorker, db: AsyncEngine, broker: BrokerProbe, resources: Resources
) -> None:
    headers = await api.new_client("retention")
    done = (await api.submit(headers, job_type="echo", payload={"n": 1})).json()["id"]
    dead_body = {"job_type": "flaky", "payload": {"fail_times": 1, "permanent": True}, "max_retries": 0}
    dead = (await api.submit(headers, **dead_body)).json()["id"]
    young_dead = (await api.submit(headers, **dead_body)).json()["id"]
    finished = [(await until_status(api, headers, i, 30))["status"] for i in (done, dead, young_dead)]
    assert finished == ["succeeded", "dead_lettered", "dead_lettered"]

    async def both_in_dlq() -> bool:
        return {dead, young_dead} <= set(await dlq_ids(broker))

    assert await wait_for(both_in_dlq)
    await finish_long_ago(db, done, 31)
    await finish_long_ago(db, dead, 91)

    await Retention.from_settings(resources).sweep()

    for job_id in (done, dead):
        assert (await api.client.get(f"/api/v1/jobs/{job_id}", headers=headers)).status_code == 404
        for tail in ("events", "logs", "artifact"):
            assert (await api.client.get(f"/api/v1/jobs/{job_id}/{tail}", headers=headers)).status_code == 404
    assert (await api.client.post(f"/api/v1/jobs/{dead}/retry", headers=headers)).status_code == 404
    replayed = await api.client.post("/api/v1/dlq/replay", json={"job_ids": [dead]}, headers=headers)
    assert replayed.json() == {"replayed": 0, "job_ids": []}
    left = await dlq_ids(broker)
    assert dead not in left and young_dead in left
    assert (await api.job(headers, young_dead))["status"] == "dead_lettered"


async def an_audit_row_waits_for_a_lock(db: AsyncEngine) -> bool:
    """Whether a statement writing the audit trail of this test database waits for a lock."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query ILIKE '%INSERT INTO job_events%'"
    )
    async with db.connect() as conn:
        return bool((await conn.execute(query)).scalar_one())


async def test_a_retry_that_races_with_the_pruning_of_its_job_answers_404(api: Api, db: AsyncEngine) -> None:
    """The retry has read the dead job when a prune deletes it: the replay's audit row waits on the deleted row,
    then finds no job to belong to. That is the job gone, a 404, never a 500 and never a job made again."""
    headers = await api.new_client("retention-race")
    job = make_job(client_id="retention-race", status="dead_lettered", finished_at=NOW - timedelta(days=91))
    async with db.begin() as conn:
        await conn.execute(insert(JOBS).values(**job))
    async with db.connect() as pruning:
        transaction = await pruning.begin()
        gone = await pruning.execute(delete_finished([job["id"]], S.DEAD_LETTERED, NOW - timedelta(days=90)))
        assert list(gone.scalars()) == [job["id"]]  # deleted, not yet committed
        retry = asyncio.create_task(api.client.post(f"/api/v1/jobs/{job['id']}/retry", headers=headers))
        await wait_for(lambda: an_audit_row_waits_for_a_lock(db), within=10)
        await transaction.commit()
    answer = await retry
    assert answer.status_code == 404, answer.text
    async with db.connect() as conn:
        assert (await conn.execute(select(func.count()).where(JOBS.c.id == job["id"]))).scalar_one() == 0
