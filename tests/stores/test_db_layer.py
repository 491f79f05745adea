"""The database layer on PostgreSQL and SQLite alike: UTC datetimes, compare-and-set, the filtered
unique index, keyset pages and the outbox relay."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker, Outgoing
from app.core.database import NO_AUTOVACUUM, STATEMENT_LIFETIME, make_engine, server_warning
from app.core.messages import event_id
from app.core.names import Names
from app.core.statuses import JobStatus
from app.core.topology import build_topology
from app.models.tables import JOB_EVENTS, JOBS, OUTBOX
from app.stores import pagination
from app.stores.jobs.moves import Change
from app.stores.jobs.portable import PortableJobs
from app.stores.outbox import Pending
from app.stores.outbox.portable import PortableOutbox
from app.stores.steps import step
from tests.conftest import RABBITMQ_URL, make_settings
from tests.support import BrokerProbe, make_job, outbox_for, stores_for, wait_for

Row = dict[str, Any]
NAMES = Names(make_settings().namespace)
WRITTEN_AT = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)


async def insert_jobs(engine: AsyncEngine, *jobs: Row) -> None:
    async with engine.begin() as conn:
        for job in jobs:
            await conn.execute(insert(JOBS).values(**job))


async def read_job(engine: AsyncEngine, job_id: str) -> Row:
    async with engine.connect() as conn:
        return dict((await conn.execute(select(JOBS).where(JOBS.c.id == job_id))).one()._mapping)


# -- UTC datetimes --------------------------------------------------------------------------------


async def test_the_log_is_warned_when_postgresql_runs_without_autovacuum(engine: AsyncEngine) -> None:
    """Without autovacuum no table is analysed and no dead row cleared."""
    warning = await server_warning(engine)
    if engine.dialect.name == "sqlite":
        assert warning is None
        return
    async with engine.connect() as conn:
        setting = (await conn.exec_driver_sql("SHOW autovacuum")).scalar()
    assert setting in ("on", "off")
    assert warning == (NO_AUTOVACUUM if setting == "off" else None)


async def test_postgresql_connections_prepare_their_statements_afresh_every_half_minute(db: AsyncEngine) -> None:
    """So a generic plan made while the tables were small is not kept for as long as the process runs."""
    async with db.connect() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        assert driver._config.max_cached_statement_lifetime == STATEMENT_LIFETIME == 30


async def test_a_database_that_does_not_answer_gives_no_warning_and_no_error() -> None:
    db = make_engine("postgresql+asyncpg://postgres@127.0.0.1:1/nothing")  # nothing listens on port 1
    try:
        assert await server_warning(db) is None
    finally:
        await db.dispose()


async def test_datetimes_come_back_as_the_same_utc_instant_to_the_microsecond(engine: AsyncEngine) -> None:
    two_hours_east = timezone(timedelta(hours=2))
    lease = datetime(2026, 1, 2, 5, 4, 5, 654321, tzinfo=two_hours_east)  # 03:04:05.654321 UTC
    job = make_job(lease_until=lease, next_attempt_at=WRITTEN_AT + timedelta(microseconds=1))
    await insert_jobs(engine, job)

    back = await read_job(engine, job["id"])

    assert back["created_at"] == WRITTEN_AT
    assert back["created_at"].isoformat() == "2026-01-02T03:04:05.123456+00:00"
    assert back["next_attempt_at"].isoformat() == "2026-01-02T03:04:05.123457+00:00"
    assert back["lease_until"] == lease
    assert back["lease_until"].isoformat() == "2026-01-02T03:04:05.654321+00:00"
    assert back["started_at"] is None


async def test_a_naive_datetime_is_refused(engine: AsyncEngine) -> None:
    job = make_job(created_at=datetime(2026, 1, 2, 3, 4, 5))  # naive on purpose
    with pytest.raises(StatementError) as caught:
        await insert_jobs(engine, job)
    assert isinstance(caught.value.orig, ValueError)
    assert "naive datetime" in str(caught.value.orig)
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).where(JOBS.c.id == job["id"]))).scalar_one() == 0


# -- compare-and-set ------------------------------------------------------------------------------


async def _move_alone(engine: AsyncEngine, job: Row, to: JobStatus) -> tuple[Row, Pending] | None:
    jobs = PortableJobs(engine, NAMES, PortableOutbox(engine), lease_seconds=30)
    async with engine.begin() as conn:  # a step to `to` from wherever the transition table allows
        moved = await jobs.move(conn, step(f"to_{to}", to), [Change(job)])
        return moved[0] if moved else None


async def _trail(engine: AsyncEngine, job_id: str) -> tuple[list[str], int]:
    """The job's audit events and how many outbox rows carry one of its events."""
    async with engine.connect() as conn:
        events = (await conn.execute(select(JOB_EVENTS.c.event).where(JOB_EVENTS.c.job_id == job_id))).scalars()
        prefix = event_id(job_id, 0).removesuffix("0")
        staged = await conn.execute(select(func.count()).where(OUTBOX.c.message_id.like(f"{prefix}%")))
        return list(events), staged.scalar_one()


# RUNNING -> RUNNING is allowed (a lease takeover), so for RUNNING only the seq in the WHERE stops the loser.
@pytest.mark.parametrize("to", [JobStatus.QUEUED, JobStatus.RUNNING])
async def test_two_concurrent_moves_of_the_same_row_let_exactly_one_win(engine: AsyncEngine, to: JobStatus) -> None:
    job = make_job()
    await insert_jobs(engine, job)
    as_read = await read_job(engine, job["id"])

    results = await asyncio.gather(_move_alone(engine, as_read, to), _move_alone(engine, as_read, to))

    winners = [r for r in results if r is not None]
    assert len(winners) == 1 and results.count(None) == 1
    moved, staged = winners[0]
    assert (moved["status"], moved["seq"]) == (str(to), 1)
    assert staged.message.message_id == event_id(job["id"], 1)
    assert staged.message.routing_key == f"job.echo.{to}"
    after = await read_job(engine, job["id"])
    assert (after["status"], after["seq"]) == (str(to), 1)
    assert await _trail(engine, job["id"]) == ([str(to)], 1)


async def test_a_transition_the_table_forbids_changes_nothing(engine: AsyncEngine) -> None:
    job = make_job(status=str(JobStatus.SUCCEEDED), seq=3, result={"ok": True})
    await insert_jobs(engine, job)

    assert await _move_alone(engine, await read_job(engine, job["id"]), JobStatus.QUEUED) is None

    after = await read_job(engine, job["id"])
    assert (after["status"], after["seq"], after["updated_at"]) == ("succeeded", 3, WRITTEN_AT)
    assert await _trail(engine, job["id"]) == ([], 0)


async def test_a_claim_from_a_stale_read_loses_although_the_table_allows_it(engine: AsyncEngine) -> None:
    job = make_job()
    await insert_jobs(engine, job)
    assert await _move_alone(engine, job, JobStatus.RUNNING) is not None

    assert await _move_alone(engine, job, JobStatus.RUNNING) is None  # still thinks seq 0

    after = await read_job(engine, job["id"])
    assert (after["status"], after["seq"]) == ("running", 1)
    assert await _trail(engine, job["id"]) == (["running"], 1)


# -- the filtered unique index --------------------------------------------------------------------


async def test_many_jobs_of_one_client_may_have_no_idempotency_key(engine: AsyncEngine) -> None:
    first = make_job()
    second = make_job(client_id=first["client_id"])
    await insert_jobs(engine, first, second)
    async with engine.connect() as conn:
        count = select(func.count()).where(JOBS.c.client_id == first["client_id"], JOBS.c.idempotency_key.is_(None))
        assert (await conn.execute(count)).scalar_one() == 2


async def test_one_client_cannot_reuse_an_idempotency_key(engine: AsyncEngine) -> None:
    first = make_job(idempotency_key="order-42")
    await insert_jobs(engine, first)
    with pytest.raises(IntegrityError):
        await insert_jobs(engine, make_job(client_id=first["client_id"], idempotency_key="order-42"))


async def test_two_clients_may_use_the_same_idempotency_key(engine: AsyncEngine) -> None:
    key = "shared-" + uuid.uuid4().hex
    await insert_jobs(engine, make_job(idempotency_key=key), make_job(idempotency_key=key))
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).where(JOBS.c.idempotency_key == key))).scalar_one() == 2


# -- keyset pagination ----------------------------------------------------------------------------


async def _page(engine: AsyncEngine, client_id: str, limit: int, cursor: str | None) -> tuple[list[str], str | None]:
    """One page through the keyset pager, with the cursor the API would hand out."""
    rows, next_cursor = await pagination.newest_first(
        engine, JOBS, select(JOBS).where(JOBS.c.client_id == client_id), limit, cursor, "jobs"
    )
    return [row["id"] for row in rows], next_cursor


async def test_keyset_pages_visit_every_job_once_even_when_timestamps_tie(engine: AsyncEngine) -> None:
    client = "c_" + uuid.uuid4().hex[:12]
    tied = [make_job(client_id=client) for _ in range(7)]
    others = [
        make_job(client_id=client, created_at=WRITTEN_AT + timedelta(seconds=1)),
        make_job(client_id=client, created_at=WRITTEN_AT - timedelta(microseconds=1)),
        make_job(client_id=client, created_at=WRITTEN_AT - timedelta(days=1)),
    ]
    await insert_jobs(engine, *tied, *others)
    newest_first = [j["id"] for j in sorted(tied + others, key=lambda j: (j["created_at"], j["id"]), reverse=True)]

    seen: list[str] = []
    pages = 0
    cursor: str | None = None
    while True:
        ids, cursor = await _page(engine, client, 3, cursor)
        seen.extend(ids)
        pages += 1
        if cursor is None:
            break

    assert seen == newest_first
    assert len(set(seen)) == 10
    assert pages == 4


# -- the outbox relay -----------------------------------------------------------------------------


async def test_the_relay_publishes_a_staged_message_and_forgets_it(engine: AsyncEngine, broker: BrokerProbe) -> None:
    names = broker.topology.names
    publisher = Broker(RABBITMQ_URL, build_topology(make_settings()), 2, name="test-db-relay")
    await publisher.start(wait=10)
    try:
        await broker.purge(names.webhook_events_queue)
        message_id = "evt_relay_" + uuid.uuid4().hex
        async with engine.begin() as conn:
            await conn.execute(delete(OUTBOX))  # start from an empty outbox
            event = Outgoing(names.events_exchange, "job.echo.succeeded", b'{"x":1}', message_id=message_id)
            await stores_for(engine, NAMES).outbox.stage(conn, [event])

        relayed = await outbox_for(stores_for(engine, NAMES), publisher, relay_after=0).relay_once()

        assert relayed == 1
        async with engine.connect() as conn:
            assert (await conn.execute(select(func.count()).select_from(OUTBOX))).scalar_one() == 0
        assert await _arrivals(broker, names.webhook_events_queue, message_id) == [message_id]
    finally:
        await publisher.close()


async def test_rows_a_relay_took_and_could_not_publish_go_to_another_relay_once_its_hold_runs_out(
    engine: AsyncEngine, broker: BrokerProbe
) -> None:
    """A relay pass holds the rows it took; one that failed (or died) mid-pass leaves them to the next relay only
    after its hold (three PUBLISH_TIMEOUT_SECONDS, 15 s by default) rather than a fixed minute."""
    names = broker.topology.names
    topology = build_topology(make_settings())
    down = Broker(RABBITMQ_URL, topology, 2, name="test-db-relay-down")  # never started: every publish fails
    publisher = Broker(RABBITMQ_URL, topology, 2, name="test-db-relay-up")
    await publisher.start(wait=10)
    try:
        await broker.purge(names.webhook_events_queue)
        message_id = "evt_held_" + uuid.uuid4().hex
        async with engine.begin() as conn:
            await conn.execute(delete(OUTBOX))
            message = Outgoing(names.events_exchange, "job.echo.succeeded", b'{"x":1}', message_id=message_id)
            await stores_for(engine, NAMES).outbox.stage(conn, [message])

        assert await outbox_for(stores_for(engine, NAMES), down, 0, 3).relay_once() == 0
        other = outbox_for(stores_for(engine, NAMES), publisher, 0, 3)
        assert await other.relay_once() == 0  # still held by the relay that failed
        async with engine.connect() as conn:
            held = (await conn.execute(select(OUTBOX.c.locked_until))).scalar_one()
        assert held is not None

        async def taken_over() -> bool:
            return await other.relay_once() == 1

        await wait_for(taken_over, within=15)
        assert await _arrivals(broker, names.webhook_events_queue, message_id) == [message_id]
        async with engine.connect() as conn:
            assert (await conn.execute(select(func.count()).select_from(OUTBOX))).scalar_one() == 0
    finally:
        await publisher.close()


async def _arrivals(broker: BrokerProbe, queue: str, message_id: str) -> list[str | None]:
    """The ids of the messages taken from `queue` until `message_id` came (waiting up to 10 s for it)."""
    arrived: list[str | None] = []

    async def delivered() -> bool:
        arrived.extend(m.message_id for m in await broker.take_all(queue))
        return message_id in arrived

    await wait_for(delivered, within=10)
    return arrived
