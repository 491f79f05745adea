"""Concurrency keys and rate limits in the store (docs/flow-control.md) on PostgreSQL and SQLite: admission grants a
key's free slots and holds the rest, oldest first, with one `throttled` row; a finished run frees its slot and
the release grants the next held job with its lane message staged; a rate window grants its limit and holds the
rest until it passes; two clients' keys of the same name are their own; MSSQL renders the statements."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import JobMessage
from app.core.names import Names
from app.core.statuses import HeldReason
from app.models.claims import insert_missing
from app.models.tables import FLOW_KEYS, FLOW_STARTS, JOB_EVENTS, JOBS
from app.stores.flow import KeyCounts, KeyRef
from app.stores.flow import statements as flow_statements
from app.stores.flow.postgres import LOCK_CONCURRENCY, RELEASE_PLAIN
from app.stores.flow.postgres_release import LOOK, RELEASE_LOOKED
from app.workers.verdicts import Claimed
from tests.conftest import NS, REDIS_URL
from tests.support import claim_many, drop_jobs, make_job, statements, stores_for

NAMES = Names(NS)


@pytest.fixture(autouse=True)
async def unstaged(engine: AsyncEngine) -> AsyncIterator[None]:
    yield
    await drop_jobs(engine, JOBS.c.client_id.like("flow-%"))


def a_client() -> str:
    return f"flow-{uuid.uuid4().hex[:12]}"


async def keyed(engine: AsyncEngine, client: str, n: int, **columns: Any) -> list[str]:
    base = datetime.now(UTC)
    jobs = [
        make_job(client_id=client, status="queued", seq=1, created_at=base + timedelta(milliseconds=i), **columns)
        for i in range(n)
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), jobs)
    return [job["id"] for job in jobs]


async def held_of(engine: AsyncEngine, ids: list[str]) -> dict[str, str | None]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(JOBS.c.id, JOBS.c.held).where(JOBS.c.id.in_(ids)))
        return {row.id: row.held for row in rows}


async def throttled_rows(engine: AsyncEngine, ids: list[str]) -> list[str]:
    query = select(JOB_EVENTS.c.job_id).where(JOB_EVENTS.c.job_id.in_(ids), JOB_EVENTS.c.event == "throttled")
    async with engine.connect() as conn:
        return sorted(row.job_id for row in await conn.execute(query))


async def finish(engine: AsyncEngine, job_id: str) -> None:
    values = {"status": "succeeded", "finished_at": datetime.now(UTC), "lease_until": None}
    async with engine.begin() as conn:
        await conn.execute(update(JOBS).where(JOBS.c.id == job_id).values(values))


async def test_a_key_grants_its_free_slots_and_holds_the_rest_in_order(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    client = a_client()
    ids = await keyed(engine, client, 4, concurrency_key="k", concurrency_limit=2)

    admitted = [await stores.flow.admit([job_id]) for job_id in ids[:2]]
    claimed = await claim_many(engine, NAMES, REDIS_URL, ids[:2])
    later = await stores.flow.admit(ids[2:])

    assert [a.held for a in admitted] == [set(), set()] and [type(v) for v in claimed] == [Claimed, Claimed]
    assert later.held == set(ids[2:]) and later.staged == []
    assert await held_of(engine, ids) == {ids[0]: None, ids[1]: None, ids[2]: "concurrency", ids[3]: "concurrency"}
    assert await throttled_rows(engine, ids) == sorted(ids[2:])
    assert await stores.flow.counts(client, "k") == KeyCounts(running=2, waiting=2)

    await finish(engine, ids[0])
    released, staged = await stores.flow.release([KeyRef(client, "k")], 10)

    assert released == 1 and [p.message.message_id for p in staged] == [ids[2]]  # the oldest held job
    message = JobMessage.from_bytes(staged[0].message.body)
    async with engine.connect() as conn:
        granted_at = (await conn.execute(select(JOBS.c.granted_at).where(JOBS.c.id == ids[2]))).scalar_one()
    assert message.keyed and message.granted_until == granted_at.timestamp() + stores.flow.lease.total_seconds()
    assert message.admitted(granted_at.timestamp()) and not message.admitted(message.granted_until - 1)
    assert (await held_of(engine, ids))[ids[2]] is None and (await held_of(engine, ids))[ids[3]] == "concurrency"
    assert (await stores.flow.release([KeyRef(client, "k")], 10))[0] == 0  # the granted one holds the slot
    assert (await stores.flow.admit([ids[2]])).held == set()  # its grant lets its message through
    assert [type(v) for v in await claim_many(engine, NAMES, REDIS_URL, [ids[2]])] == [Claimed]


async def test_one_batch_judges_each_job_by_its_own_limit_oldest_first_beside_rate_keyed_jobs(
    engine: AsyncEngine,
) -> None:
    """PostgreSQL judges a batch's plain jobs in one statement, the rate-keyed ones the portable way after them:
    the n-th job of a key in the batch needs the slots in use + n within its own limit, and once one waits the
    later ones wait behind it (the third, whose limit of 3 has room, waits behind the second's limit of 1); a
    rate-keyed job's concurrency key counts the grants made before it."""
    stores = stores_for(engine, NAMES)
    client = a_client()
    plain = [
        (await keyed(engine, client, 1, concurrency_key="k", concurrency_limit=limit))[0] for limit in (2, 1, 3, 1)
    ]
    rated = await keyed(
        engine, client, 2, concurrency_key="k2", concurrency_limit=1, rate_key="r", rate_starts=5, rate_period=60.0
    )

    admission = await stores.flow.admit(rated + plain)

    assert admission.held == {plain[1], plain[2], plain[3], rated[1]}
    assert admission.held_keys == {KeyRef(client, "k"), KeyRef(client, "k2")}
    assert await held_of(engine, plain + rated) == {
        plain[0]: None,
        plain[1]: "concurrency",
        plain[2]: "concurrency",
        plain[3]: "concurrency",
        rated[0]: None,
        rated[1]: "concurrency",
    }
    assert await throttled_rows(engine, plain + rated) == sorted([plain[1], plain[2], plain[3], rated[1]])
    assert await stores.flow.counts(client, "k") == KeyCounts(running=1, waiting=3)
    assert (await stores.flow.admit(plain)).held == set()  # judged once: held or granted, none again


async def test_two_clients_keys_of_one_name_are_their_own(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    us, them = a_client(), a_client()
    ours = await keyed(engine, us, 2, concurrency_key="same", concurrency_limit=1)
    theirs = await keyed(engine, them, 1, concurrency_key="same", concurrency_limit=1)

    assert (await stores.flow.admit(ours[:1])).held == set()
    assert (await stores.flow.admit(theirs)).held == set()  # our granted slot is not theirs
    assert (await stores.flow.admit(ours[1:])).held == set(ours[1:])  # but it is ours


async def test_a_rate_window_grants_its_limit_then_holds_until_it_passes(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    client = a_client()
    ids = await keyed(engine, client, 3, rate_key="r", rate_starts=2, rate_period=0.5)

    first = await stores.flow.admit(ids)

    assert first.held == {ids[2]} and first.next_window is not None
    assert (await held_of(engine, ids))[ids[2]] == "rate"
    assert (await stores.flow.release([], 10))[0] == 0  # its window has not passed
    wait = (first.next_window - datetime.now(UTC)).total_seconds()
    assert 0 < wait <= 0.5
    await asyncio.sleep(wait + 0.05)
    released, staged = await stores.flow.release([], 10)
    assert released == 1 and [p.message.message_id for p in staged] == [ids[2]]


def test_the_key_lock_and_the_slot_count_render_for_mssql() -> None:
    dialect = mssql.dialect()
    row = {"client_id": "c", "kind": "concurrency", "key": "k", "version": 0}
    lock = str(insert_missing("mssql", FLOW_KEYS, row).compile(dialect=dialect))
    now = datetime.now(UTC)
    count = select(func.count()).where(
        flow_statements.of_key(HeldReason.CONCURRENCY, "c", "k"), flow_statements.occupying(now, now)
    )
    rendered = str(count.compile(dialect=dialect))

    assert "WITH (UPDLOCK, HOLDLOCK)" in lock and "WHERE NOT (EXISTS" in lock and "ON CONFLICT" not in lock
    assert "jobs.finished_at IS NULL" in rendered and "jobs.granted_run = jobs.runs + :runs_1" in rendered


async def test_a_release_grants_in_order_and_goes_job_by_job_from_a_job_with_a_rate_key(engine: AsyncEngine) -> None:
    """A key of limit 1 with three held jobs, the middle one rate-keyed: each freed slot releases the next in order,
    the rate-keyed one through its window (a start counted), the plain ones set-wise. On PostgreSQL a plain job
    goes by the look and one statement with no transaction; the rate-keyed one is left by that statement to the
    transaction: the lock, one statement, then job by job."""
    stores = stores_for(engine, NAMES)
    client = a_client()
    first, second = await keyed(engine, client, 2, concurrency_key="k", concurrency_limit=1)
    [rated] = await keyed(
        engine, client, 1, concurrency_key="k", concurrency_limit=1, rate_key="r", rate_starts=5, rate_period=60.0
    )
    [last] = await keyed(engine, client, 1, concurrency_key="k", concurrency_limit=1)
    assert (await stores.flow.admit([first, second, rated, last])).held == {second, rated, last}

    released, sent = [], []
    for done in (first, second, rated):
        await finish(engine, done)
        with statements(engine) as seen:
            count, staged = await stores.flow.release([KeyRef(client, "k")], 10)
        assert count == len(staged) == 1
        released.append([p.message.message_id for p in staged])
        sent.append([one for one in seen if one in (LOOK, RELEASE_LOOKED, LOCK_CONCURRENCY, RELEASE_PLAIN)])
    assert released == [[second], [rated], [last]]
    if engine.dialect.name == "postgresql":
        slow = [LOOK, RELEASE_LOOKED, LOCK_CONCURRENCY, RELEASE_PLAIN]
        assert sent == [[LOOK, RELEASE_LOOKED], slow, [LOOK, RELEASE_LOOKED]]
    async with engine.connect() as conn:
        starts = select(func.count()).select_from(FLOW_STARTS).where(FLOW_STARTS.c.client_id == client)
        assert (await conn.execute(starts)).scalar_one() == 1
