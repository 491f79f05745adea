"""The artifacts' store, on PostgreSQL and SQLite (one implementation serves both): a job's row replaced by its next
run's, read by its client or an admin, and deleted by age or with its job, giving the paths of the files to
remove; a rollback keeps the rows."""

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.models.rows import ArtifactRow
from app.models.tables import ARTIFACTS
from app.stores.artifacts import ArtifactStore
from app.stores.artifacts.sql import SqlArtifacts
from tests.conftest import NS
from tests.support import stores_for

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
LONG_AGO = datetime(2001, 1, 1, tzinfo=UTC)  # older than any other test's artifact


def artifacts(engine: AsyncEngine) -> ArtifactStore:
    return stores_for(engine, Names(NS)).artifacts


def an_artifact(job_id: str | None = None, path: str | None = None, at: datetime = AT) -> ArtifactRow:
    return {
        "job_id": job_id or str(uuid.uuid4()),
        "client_id": "c_" + uuid.uuid4().hex[:12],
        "content_type": "application/pdf",
        "filename": "report.pdf",
        "size": 8,
        "sha256": "0" * 64,
        "data": None if path else b"%PDF-1.4",
        "path": path,
        "created_at": at,
    }


async def left_of(engine: AsyncEngine, job_ids: list[str]) -> set[str]:
    async with engine.connect() as conn:
        return set((await conn.execute(select(ARTIFACTS.c.job_id).where(ARTIFACTS.c.job_id.in_(job_ids)))).scalars())


async def test_every_database_gets_the_one_sql_implementation(engine: AsyncEngine) -> None:
    assert isinstance(artifacts(engine), SqlArtifacts)


async def test_a_jobs_artifact_is_replaced_and_seen_only_by_its_client_or_an_admin(engine: AsyncEngine) -> None:
    store, first = artifacts(engine), an_artifact()
    await store.put(first)
    second = {**an_artifact(first["job_id"], path="/tmp/report.pdf"), "client_id": first["client_id"]}
    await store.put(second)  # the next run's
    assert await store.get(first["job_id"], first["client_id"]) == second
    assert await store.get(first["job_id"], None) == second
    assert await store.get(first["job_id"], "c_someone_else") is None
    assert await store.get(str(uuid.uuid4()), None) is None


async def test_drop_deletes_in_the_callers_transaction_and_a_rollback_keeps_the_rows(engine: AsyncEngine) -> None:
    store = artifacts(engine)
    on_disk, in_row = an_artifact(path="/tmp/a.pdf"), an_artifact()
    ids = [on_disk["job_id"], in_row["job_id"]]
    for row in (on_disk, in_row):
        await store.put(row)
    async with engine.connect() as conn, conn.begin() as transaction:
        assert await store.drop(conn, ids) == ["/tmp/a.pdf"]
        await transaction.rollback()
    assert await left_of(engine, ids) == set(ids)
    async with engine.begin() as conn:
        assert await store.drop(conn, [*ids, str(uuid.uuid4())]) == ["/tmp/a.pdf"]
    assert await left_of(engine, ids) == set()


async def test_drop_older_than_takes_a_batch_at_a_time_and_keeps_the_young(engine: AsyncEngine) -> None:
    store = artifacts(engine)
    cutoff = LONG_AGO + timedelta(days=1)
    while (await store.drop_older_than(cutoff, 100))[0]:
        pass  # what an earlier run may have left
    old = [an_artifact(path=f"/tmp/{n}.pdf", at=LONG_AGO + timedelta(seconds=n)) for n in range(2)]
    old.append(an_artifact(at=LONG_AGO))
    young = an_artifact(at=LONG_AGO + timedelta(days=2))
    for row in (*old, young):
        await store.put(row)
    batches = [await store.drop_older_than(cutoff, 2)]
    while batches[-1][0]:
        batches.append(await store.drop_older_than(cutoff, 2))
    assert batches[0][0] == 2 and batches[-1] == (0, [])
    assert sum(count for count, _ in batches) == 3
    assert sorted(path for _, paths in batches for path in paths) == ["/tmp/0.pdf", "/tmp/1.pdf"]
    assert await left_of(engine, [row["job_id"] for row in (*old, young)]) == {young["job_id"]}
