"""The schedules store on PostgreSQL and SQLite: a client sees only its own schedules (an admin every one), pages
run newest first behind their own cursors, a change bumps the version under a row lock, and the firing statements
claim only what is due and free (not paused, not held, not locked by another scheduler) and move a schedule on
only from the version they claimed it at.

The schedules here are due in the last century, and `now` is 2001: no other test's schedule in the shared
database is due then, and each test deletes its own."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from sqlalchemy import delete, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.cursors import BadCursor, encode
from app.core.names import Names
from app.models.rows import ScheduleRow
from app.models.tables import JOBS, SCHEDULES
from app.stores.schedules import Firing, ScheduleStore
from tests.conftest import NS
from tests.support import make_job, stores_for, wait_for

NOW = datetime(2001, 1, 1, tzinfo=UTC)
DUE = datetime(1999, 1, 1, tzinfo=UTC)  # the first firing a schedule owes; each later one a minute on
NEXT = datetime(2001, 1, 2, tzinfo=UTC)  # where a firing moves it


def a_schedule(client_id: str, minutes: int = 0, **fields: Any) -> ScheduleRow:
    """A full schedules row of `client_id`, made `minutes` after the others and due as long after DUE."""
    at = DUE + timedelta(minutes=minutes)
    row = {
        "id": str(uuid.uuid4()),
        "client_id": client_id,
        "name": f"every minute {minutes}",
        "cron": "* * * * *",
        "timezone": "UTC",
        "job": {"job_type": "echo", "payload": {"n": minutes}},
        "sealed": None,
        "active": True,
        "next_run_at": at,
        "last_run_at": None,
        "version": 0,
        "created_at": at,
        "updated_at": at,
    }
    return cast(ScheduleRow, {**row, **fields})


@pytest.fixture(autouse=True)
async def cleaned(db: AsyncEngine) -> AsyncIterator[None]:
    """The schedules of the test's clients deleted from PostgreSQL afterwards (each SQLite file is the test's own)."""
    yield
    async with db.begin() as conn:
        await conn.execute(delete(SCHEDULES).where(SCHEDULES.c.client_id.like("sched-store-%")))


@pytest.fixture
def store(engine: AsyncEngine) -> ScheduleStore:
    """The store `open_stores` gives this engine."""
    return stores_for(engine, Names(NS)).schedules


@pytest.fixture
def pg_store(db: AsyncEngine) -> ScheduleStore:
    """The store on PostgreSQL alone, for what row locks do (SQLite takes none: its write transactions are serial)."""
    return stores_for(db, Names(NS)).schedules


def a_client() -> str:
    return "sched-store-" + uuid.uuid4().hex[:12]


async def add(store: ScheduleStore, *schedules: ScheduleRow) -> list[str]:
    for schedule in schedules:
        await store.insert(schedule)
    return [s["id"] for s in schedules]


async def test_a_client_sees_its_own_schedules_and_an_admin_every_one(store: ScheduleStore) -> None:
    mine, other = a_client(), a_client()
    row = a_schedule(mine)
    (made,) = await add(store, row)

    assert await store.get(made, mine) == row
    assert (await store.get(made, None)) is not None
    assert await store.get(made, other) is None
    assert await store.update(made, other, lambda row: {"name": "taken"}) is None
    assert await store.delete(made, other) is False
    assert (await store.page(other, 10, None)) == ([], None)

    assert await store.delete(made, mine) is True
    assert await store.get(made, None) is None
    assert await store.delete(made, mine) is False


async def test_pages_run_newest_first_and_a_cursor_of_another_list_is_refused(store: ScheduleStore) -> None:
    client = a_client()
    ids = await add(store, *(a_schedule(client, minutes) for minutes in range(5)))

    seen: list[str] = []
    cursor: str | None = None
    for _ in range(3):
        page, cursor = await store.page(client, 2, cursor)
        seen += [s["id"] for s in page]
    assert seen == ids[::-1] and cursor is None

    with pytest.raises(BadCursor):
        await store.page(client, 2, encode("jobs", DUE, ids[0]))


async def test_a_change_is_computed_from_the_row_as_locked_and_bumps_the_version(store: ScheduleStore) -> None:
    client = a_client()
    row = a_schedule(client)
    (made,) = await add(store, row)
    read: list[ScheduleRow] = []

    def values(row: ScheduleRow) -> dict[str, Any]:
        read.append(row)
        return {"name": "renamed", "updated_at": NOW}

    changed = await store.update(made, client, values)

    assert read == [row]
    assert changed is not None and (changed["name"], changed["version"], changed["updated_at"]) == ("renamed", 1, NOW)
    assert await store.get(made, client) == changed


async def claim(engine: AsyncEngine, store: ScheduleStore, held: frozenset[str] = frozenset()) -> list[ScheduleRow]:
    async with engine.begin() as conn:
        return await store.claim_due(conn, NOW, 100, held)


async def test_the_claim_takes_the_due_schedules_oldest_first_and_passes_over_paused_and_held_ones(
    engine: AsyncEngine, store: ScheduleStore
) -> None:
    client, held = a_client(), a_client()
    due = [a_schedule(client, minutes) for minutes in (2, 0, 1)]
    paused = a_schedule(client, 3, active=False)
    later = a_schedule(client, 4, next_run_at=NOW + timedelta(seconds=1))
    await add(store, *due, paused, later, a_schedule(held, 5))
    ours = {client, held}

    assert await store.any_due(NOW, frozenset())
    claimed = [s for s in await claim(engine, store, frozenset({held})) if s["client_id"] in ours]
    assert [s["id"] for s in claimed] == [due[1]["id"], due[2]["id"], due[0]["id"]]
    assert claimed[0] == due[1]

    assert held in {s["client_id"] for s in await claim(engine, store)}
    for schedule in due:
        await store.delete(schedule["id"], client)
    assert not await store.any_due(NOW, frozenset({held}))
    assert await store.any_due(NOW, frozenset())
    assert not await store.any_due(DUE - timedelta(seconds=1), frozenset())


async def test_the_earliest_firing_is_the_earliest_an_active_schedule_owes(store: ScheduleStore) -> None:
    client = a_client()
    await add(store, a_schedule(client, 1), a_schedule(client, 2), a_schedule(client, active=False))

    assert await store.earliest_firing() == DUE + timedelta(minutes=1)


async def test_the_claim_passes_over_a_schedule_another_scheduler_holds(
    db: AsyncEngine, pg_store: ScheduleStore
) -> None:
    client = a_client()
    ids = await add(pg_store, *(a_schedule(client, minutes) for minutes in range(3)))

    async with db.begin() as first:
        (taken,) = await pg_store.claim_due(first, NOW, 1, frozenset())
        others = [s["id"] for s in await claim(db, pg_store) if s["client_id"] == client]

    assert taken["id"] == ids[0]
    assert others == ids[1:]


async def test_a_firing_moves_its_schedule_on_once_and_loses_to_a_change_made_since_its_claim(
    engine: AsyncEngine, store: ScheduleStore
) -> None:
    client = a_client()
    stale, fresh = await add(store, a_schedule(client), a_schedule(client, 1))
    claimed = {s["id"]: s for s in await claim(engine, store) if s["client_id"] == client}
    await store.update(stale, client, lambda row: {"name": "changed since"})

    firings = [Firing(claimed[i], claimed[i]["next_run_at"] or NOW, NEXT) for i in (stale, fresh)]
    async with engine.begin() as conn:
        assert await store.advance(conn, firings, NOW) == {fresh}
    async with engine.begin() as conn:
        assert await store.advance(conn, firings, NOW) == set()  # each firing moves its schedule once

    moved = await store.get(fresh, client)
    assert moved is not None
    assert (moved["next_run_at"], moved["last_run_at"], moved["version"]) == (NEXT, DUE + timedelta(minutes=1), 1)
    assert moved["updated_at"] == NOW
    left = await store.get(stale, client)
    assert left is not None and (left["next_run_at"], left["last_run_at"], left["version"]) == (DUE, None, 1)


async def test_a_change_waits_for_the_firing_that_holds_its_schedule_and_reads_the_row_it_left(
    db: AsyncEngine, pg_store: ScheduleStore
) -> None:
    client = a_client()
    (made,) = await add(pg_store, a_schedule(client))
    async with db.begin() as conn:
        (claimed,) = [s for s in await pg_store.claim_due(conn, NOW, 100, frozenset()) if s["id"] == made]
        change = asyncio.create_task(pg_store.update(made, client, lambda row: {"name": "paused", "active": False}))
        await wait_for(lambda: waiting_on_a_schedule(db))
        assert await pg_store.advance(conn, [Firing(claimed, DUE, NEXT)], NOW) == {made}

    changed = await change
    assert changed is not None and (changed["next_run_at"], changed["version"]) == (NEXT, 2)


async def waiting_on_a_schedule(engine: AsyncEngine) -> bool:
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query ILIKE '%FROM schedules%'"
    )
    async with engine.connect() as conn:
        return bool((await conn.execute(query)).scalar_one())


async def test_fired_names_the_firings_whose_jobs_are_saved(engine: AsyncEngine, store: ScheduleStore) -> None:
    client = a_client()
    key, other = f"schedule:{uuid.uuid4()}:1999-01-01T00:00:00Z", f"schedule:{uuid.uuid4()}:1999-01-01T00:00:00Z"
    job = make_job(client_id=client, status="succeeded", idempotency_key=key)
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), [job])
    try:
        async with engine.connect() as conn:
            assert await store.fired(conn, [key, other]) == {(client, key)}
            assert await store.fired(conn, []) == set()
    finally:
        async with engine.begin() as conn:
            await conn.execute(delete(JOBS).where(JOBS.c.id == job["id"]))
