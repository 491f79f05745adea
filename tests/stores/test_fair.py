"""Fair turns in the store (docs/flow-control.md) on PostgreSQL and SQLite: a client's jobs in a lane are counted
up to a cap, with whether others wait their turn; the release sends as many as the share has room for, by priority
then submission, each with its lane message staged and flagged; another client's and another lane's are their
own; the sweep finds every client with jobs waiting; MSSQL renders the statements."""

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import JobMessage
from app.core.names import Lane, Names
from app.models.tables import JOBS
from app.stores.flow.fair import LaneRef, LaneState, next_turns, state_read
from tests.conftest import NS
from tests.support import drop_jobs, make_job, stores_for

NAMES = Names(NS)


@pytest.fixture(autouse=True)
async def unstaged(engine: AsyncEngine) -> AsyncIterator[None]:
    yield
    await drop_jobs(engine, JOBS.c.client_id.like("fair-%"))


def a_client() -> str:
    return f"fair-{uuid.uuid4().hex[:12]}"


async def jobs(engine: AsyncEngine, client: str, n: int, held: str | None, **columns: Any) -> list[str]:
    base = datetime.now(UTC)
    rows = [
        make_job(client_id=client, status="queued", seq=1, held=held, created_at=base + timedelta(milliseconds=i))
        | columns
        for i in range(n)
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), rows)
    return [row["id"] for row in rows]


async def held_ids(engine: AsyncEngine, client: str) -> set[str]:
    query = select(JOBS.c.id).where(JOBS.c.client_id == client, JOBS.c.held == "fair")
    async with engine.connect() as conn:
        return set((await conn.execute(query)).scalars())


async def test_a_lane_counts_its_jobs_up_to_the_cap_and_sees_a_backlog(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    client, other = a_client(), a_client()
    await jobs(engine, client, 5, None)
    await jobs(engine, client, 3, "fair")
    await jobs(engine, client, 2, None, priority=9)
    await jobs(engine, other, 1, None)

    states = await stores.fair.lanes(
        [LaneRef(client, Lane.DEFAULT), LaneRef(client, Lane.BULK), LaneRef(client, Lane.CRITICAL)], cap=4
    )
    alone = await stores.fair.lanes([LaneRef(other, Lane.DEFAULT)], cap=4)

    assert states == {
        LaneRef(client, Lane.DEFAULT): LaneState(4, True),
        LaneRef(client, Lane.BULK): LaneState(2, False),
        LaneRef(client, Lane.CRITICAL): LaneState(0, False),
    }
    assert alone == {LaneRef(other, Lane.DEFAULT): LaneState(1, False)}


async def test_the_release_fills_the_share_by_priority_then_submission(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    client, other = a_client(), a_client()
    await jobs(engine, client, 2, None)
    waiting = await jobs(engine, client, 6, "fair")
    urgent = await jobs(engine, client, 1, "fair", priority=4)
    theirs = await jobs(engine, other, 3, "fair")

    waits = await stores.fair.release([LaneRef(client, Lane.DEFAULT)], lambda lane: 5, least=0.8)  # room 3 of 5
    staged = await stores.fair.release([LaneRef(client, Lane.DEFAULT)], lambda lane: 5, least=0.6)
    again = await stores.fair.release([LaneRef(client, Lane.DEFAULT)], lambda lane: 5)

    messages = [JobMessage.from_bytes(pending.message.body) for pending in staged]
    assert [m.job_id for m in messages] == [urgent[0], *waiting[:2]]
    assert all(m.fair for m in messages) and waits == again == []
    assert await held_ids(engine, client) == set(waiting[2:]) and await held_ids(engine, other) == set(theirs)


async def test_the_sweep_releases_every_client_with_jobs_waiting(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    first, second = a_client(), a_client()
    await jobs(engine, first, 3, "fair")
    await jobs(engine, second, 3, "fair", priority=9)

    staged = await stores.fair.release(None, lambda lane: 2)

    released = [JobMessage.from_bytes(pending.message.body) for pending in staged]
    mine = [(m.client_id, m.priority) for m in released if m.client_id in (first, second)]
    assert sorted(mine) == sorted([(first, 5)] * 2 + [(second, 9)] * 2)
    assert len(await held_ids(engine, first)) == 1 and len(await held_ids(engine, second)) == 1


def test_the_lane_count_and_the_release_render_for_mssql() -> None:
    dialect = mssql.dialect()
    refs = [LaneRef("c", Lane.DEFAULT), LaneRef("c", Lane.BULK)]
    read = str(state_read(refs, 8).compile(dialect=dialect))
    take = str(next_turns(refs[0], 3).compile(dialect=dialect))

    assert "UNION ALL" in read and "TOP" in read and "CASE WHEN (EXISTS" in read and "LIMIT" not in read
    assert "READPAST" in take and "TOP" in take and "ORDER BY jobs.priority, jobs.created_at" in take
