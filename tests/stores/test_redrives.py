"""The redrives store on PostgreSQL and SQLite: the items taken at creation, a turn that sends them and moves the
position in one transaction, a turn that loses to a pause or to another driver leaving nothing behind, and one
lease at a time."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.core.statuses import REDRIVE_ACTIONS, RedriveKind
from app.models.tables import JOB_EVENTS, JOBS, REDRIVE_ITEMS
from app.stores.redrives import NewRedrive, RedriveStore
from app.stores.redrives.advance import Advance, Lost
from tests.conftest import NS
from tests.support import make_job, stores_for

NAMES = Names(NS)


async def dead(engine: AsyncEngine, client: str, n: int) -> list[str]:
    died = datetime.now(UTC) - timedelta(minutes=1)
    rows = [
        make_job(client_id=client, status="dead_lettered", finished_at=died + timedelta(seconds=n - i))
        for i in range(n)
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), rows)
    return [row["id"] for row in reversed(rows)]  # oldest death first


async def test_a_redrive_sends_its_items_oldest_first_once_and_loses_whole_to_a_pause(engine: AsyncEngine) -> None:
    client = "c_" + uuid.uuid4().hex[:10]
    ids = await dead(engine, client, 5)
    store = RedriveStore(engine)
    redrive = await store.create(NewRedrive(client, client, RedriveKind.JOBS, {"job_ids": ids}, 4, 10))
    assert (redrive["total"], redrive["status"]) == (4, "running")
    [leased] = [row for row in await store.lease("one", 10) if row["id"] == redrive["id"]]
    assert [row["id"] for row in await store.lease("two", 10) if row["id"] == redrive["id"]] == []  # one driver
    stores = stores_for(engine, NAMES)
    advance = Advance(stores.jobs, stores.outbox, NAMES)
    step = await advance(leased, "one", 2, 10)
    assert (step.replayed, step.skipped, step.reached, step.finished) == (2, 0, 2, False)
    with pytest.raises(Lost):  # a stale position: the turn it read is done already
        await advance(leased, "one", 2, 10)
    await store.move(redrive["id"], *REDRIVE_ACTIONS["pause"], client)
    with pytest.raises(Lost):
        await advance({**leased, "reached": 2}, "one", 2, 10)
    async with engine.connect() as conn:
        statuses = dict((await conn.execute(select(JOBS.c.id, JOBS.c.status).where(JOBS.c.id.in_(ids)))).all())
        theirs = select(func.count()).where(JOB_EVENTS.c.event == "replayed", JOB_EVENTS.c.job_id.in_(ids))
        replayed = (await conn.execute(theirs)).scalar()
    assert [statuses[i] for i in ids] == ["queued", "queued", "dead_lettered", "dead_lettered", "dead_lettered"]
    assert replayed == 2  # the lost turns left no audit row
    await store.move(redrive["id"], *REDRIVE_ACTIONS["resume"], client)
    [again] = [row for row in await store.lease("two", 10) if row["id"] == redrive["id"]]  # the pause freed it
    step = await advance(again, "two", 5, 10)
    assert (step.replayed, step.reached, step.finished) == (2, 4, True)
    done = await store.one(redrive["id"], client)
    assert done is not None and (done["status"], done["replayed"], done["skipped"]) == ("finished", 4, 0)
    assert [h["event"] for h in done["history"]] == ["created", "paused", "resumed", "finished"]
    async with engine.connect() as conn:
        left = select(func.count()).where(REDRIVE_ITEMS.c.redrive_id == redrive["id"])
        assert (await conn.execute(left)).scalar() == 0  # an ended redrive's items are forgotten
    assert await store.one(redrive["id"], "c_someone_else") is None
