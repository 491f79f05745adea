"""The hot path's statements on PostgreSQL go straight to asyncpg (app/stores/postgres.py `rows`): what a
caller sees of their failures must be what SQLAlchemy would have shown it, and a connection lost under one
must not go back to the pool."""

from datetime import UTC, datetime

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.database import is_unreachable
from app.stores.jobs import NewJobs
from app.stores.jobs import postgres as pg_jobs
from app.stores.jobs.postgres_sql import QUEUE_RECORDED
from app.stores.postgres import PgConnections
from tests.stores.test_pg_claim import NAMES, add
from tests.support import make_job, statements, stores_for, wait_for

EVENTS = NAMES.events_exchange


async def test_a_duplicate_job_is_an_integrity_error_with_the_drivers_error_inside(db: AsyncEngine) -> None:
    job = {**make_job(status="pending"), "run_at": None, "sealed": None}
    await add(db, job)
    jobs = stores_for(db, NAMES).jobs
    async with jobs.one_transaction() as conn:
        with pytest.raises(IntegrityError) as raised:
            await jobs.save(conn, NewJobs([job], [], [], []))  # type: ignore[list-item]
    # asyncpg's own error, not SQLAlchemy's adapter of it: the statement went past SQLAlchemy
    assert isinstance(raised.value.orig, asyncpg.UniqueViolationError)
    assert not is_unreachable(raised.value)


async def test_a_connection_cut_under_a_statement_is_unreachable_and_not_reused(db: AsyncEngine) -> None:
    [job_id] = await add(db, make_job(status="pending"))
    now = datetime.now(UTC)
    async with PgConnections(db, keep=False).autocommit() as conn:
        cut = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        async with db.connect() as other:
            assert (await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": cut})).scalar_one()
        with pytest.raises(DBAPIError) as raised:
            await pg_jobs.queue_recorded(conn, [job_id], now, EVENTS, [])
    assert is_unreachable(raised.value)
    assert raised.value.connection_invalidated
    async with PgConnections(db, keep=False).autocommit() as conn:
        assert (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one() != cut
        moved = await pg_jobs.queue_recorded(conn, [job_id], now, EVENTS, [])
    assert [(one.row["id"], one.row["status"], one.row["seq"]) for one in moved] == [(job_id, "queued", 1)]


async def test_statements_go_through_sqlalchemy_while_something_listens(db: AsyncEngine) -> None:
    [job_id] = await add(db, make_job(status="pending"))
    with statements(db) as seen:
        async with PgConnections(db, keep=False).autocommit() as conn:
            moved = await pg_jobs.queue_recorded(conn, [job_id], datetime.now(UTC), EVENTS, [])
    assert [one.row["id"] for one in moved] == [job_id]
    assert seen == [QUEUE_RECORDED]


async def backend(conn: object) -> int:
    return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())  # type: ignore[attr-defined]


async def test_kept_connections_are_reused_skipped_once_the_server_closed_them_and_given_back(
    db: AsyncEngine,
) -> None:
    [job_id] = await add(db, make_job(status="pending"))
    connections = PgConnections(db)
    try:
        async with connections.autocommit() as conn:
            first = await backend(conn)
        async with connections.autocommit() as conn:
            assert await backend(conn) == first  # the same connection, kept between the two
        async with db.connect() as other:
            await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        [kept] = connections.kept

        async def closed() -> bool:
            return bool(kept.sync_connection.connection.driver_connection.is_closed())  # type: ignore[union-attr]

        await wait_for(closed, within=10)
        # A server restart closes every idle connection so: once that is seen, no statement meets it.
        async with connections.autocommit() as conn:
            second = await backend(conn)
            moved = await pg_jobs.queue_recorded(conn, [job_id], datetime.now(UTC), EVENTS, [])
        assert second != first
        assert [one.row["id"] for one in moved] == [job_id]
        assert db.sync_engine.pool.checkedout() == 1  # kept between uses
    finally:
        await connections.close()
    assert db.sync_engine.pool.checkedout() == 0  # back in the pool, which the engine's dispose closes
    assert connections.kept == []
    async with db.connect() as conn:  # the cut connection did not go back into the pool either
        assert await backend(conn) not in (first, 0)
