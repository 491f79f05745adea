"""The release of a run's key on PostgreSQL (app/stores/flow/postgres_release.py): a look at the key's oldest held
jobs and one statement that grants those that fit with their lane messages staged, both with no transaction; a
decision on the key after that statement's snapshot, or a held job that fits but was not looked at, leaves the key
to the release in a transaction, which sees it."""

import asyncio
from datetime import timedelta

from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import JobMessage
from app.core.names import Names
from app.models.tables import JOBS, OUTBOX
from app.models.types import utcnow
from app.stores import postgres
from app.stores.flow import KeyRef
from app.stores.flow.postgres import LOCK_CONCURRENCY, RELEASE_PLAIN
from app.stores.flow.postgres_release import LOOK, RELEASE_LOOKED, granted_now, release_params, released
from tests.conftest import NS
from tests.stores.test_flow import finish
from tests.stores.test_pg_admit import columns, keyed_job, version
from tests.stores.test_pg_claim import add
from tests.support import statements, stores_for, wait_for, waiting_on_a_row_lock

NAMES = Names(NS)
RELEASES = (LOOK, RELEASE_LOOKED, LOCK_CONCURRENCY, RELEASE_PLAIN)


def held(client: str, n: int, limit: int = 1) -> dict[str, object]:
    return keyed_job(client, n, limit=limit, held="concurrency")


async def test_a_keys_next_job_is_released_by_two_statements_with_no_transaction(db: AsyncEngine, client: str) -> None:
    """Two jobs held for a key of limit 1 whose run ended: the older granted, its lane message staged (its grant
    holds a lease, so its claim needs no admission), the other still held; two statements, each alone, and the
    key's version bumped once."""
    ids = await add(db, held(client, 0), held(client, 1))
    stores = stores_for(db, NAMES)
    with statements(db, autocommit=True) as seen:
        count, staged = await stores.flow.release([KeyRef(client, "k")], 10)

    assert [(sql, alone) for sql, alone in seen if sql in RELEASES] == [(LOOK, True), (RELEASE_LOOKED, True)]
    assert count == 1 and [p.message.message_id for p in staged] == [ids[0]]
    assert JobMessage.from_bytes(staged[0].message.body).admitted(utcnow().timestamp())
    assert await columns(db, ids, "held", "granted_run") == [(None, 1), ("concurrency", None)]
    async with db.connect() as conn:
        outbox = select(OUTBOX.c.message_id).where(OUTBOX.c.id == staged[0].id)
        assert (await conn.execute(outbox)).scalar_one() == ids[0]
    assert await version(db, client) == 1


async def test_a_decision_on_the_key_after_the_statements_snapshot_leaves_the_key_to_a_transaction(
    db: AsyncEngine, client: str
) -> None:
    """Another transaction holds the key's row and starts a run of the key (limit 1) while the release statement
    waits for that row: the statement's snapshot does not see the run, so it must not grant the held job. The key
    is released again in a transaction that does see the run, and the job stays held."""
    [job_id] = await add(db, held(client, 0))
    stores = stores_for(db, NAMES)
    async with db.connect() as other:
        await other.execute(text("UPDATE flow_keys SET version = version + 1 WHERE client_id = :c"), {"c": client})
        lease = utcnow() + timedelta(minutes=5)
        running = keyed_job(client, n=-1, limit=1, status="running", runs=1, attempts=1, lease_until=lease)
        await other.execute(insert(JOBS).values(running))
        with statements(db) as seen:
            release = asyncio.create_task(stores.flow.release([KeyRef(client, "k")], 10))
            await wait_for(lambda: waiting_on_a_row_lock(db, naming="flow_keys"), within=10)
            await other.commit()
            count, staged = await release

    assert (count, staged) == (0, [])
    assert await columns(db, [job_id], "held", "granted_run") == [("concurrency", None)]
    assert [one for one in seen if one in RELEASES] == list(RELEASES)
    assert await version(db, client) == 3  # the other transaction's bump, the statement's, the transaction's


async def test_a_held_job_older_than_those_looked_at_leaves_the_key_to_a_transaction(
    db: AsyncEngine, client: str
) -> None:
    """A job held after the look and older than the one it found: the statement grants neither (the older one
    goes first) and names the key; the next release grants both, in order (limit 2)."""
    [younger] = await add(db, held(client, 1, limit=2))
    flow = stores_for(db, NAMES).flow
    look = await flow.look([KeyRef(client, "k")], 10)
    assert look is not None and [job["id"] for job in look.jobs] == [younger]
    [older] = await add(db, held(client, 0, limit=2))
    now = utcnow()
    messages = flow._messages([granted_now(job, now) for job in look.jobs])  # type: ignore[attr-defined]

    async with stores_for(db, NAMES).connections.autocommit() as conn:  # type: ignore[union-attr]
        found = await postgres.rows(
            conn, RELEASE_LOOKED, release_params(look.jobs, messages, now, timedelta(seconds=30), 10)
        )
    assert released(found, messages) == ([], [KeyRef(client, "k")])
    assert await columns(db, [older, younger], "held") == [("concurrency",), ("concurrency",)]

    count, staged = await flow.release([KeyRef(client, "k")], 10)
    assert count == 2 and [p.message.message_id for p in staged] == [older, younger]


async def test_a_release_from_a_look_ahead_sends_one_statement_and_looks_again_at_a_key_it_found_nothing_of(
    db: AsyncEngine, client: str
) -> None:
    """A look taken while the run's outcome was being recorded: for a key it found held jobs of, the release is the
    one statement; for a key it found none of, a job held since (by an admission that counted the run as running)
    is looked at again and released, not left for the sweep."""
    [first] = await add(db, held(client, 0))
    flow = stores_for(db, NAMES).flow
    ahead = await flow.look([KeyRef(client, "k")], 10)
    with statements(db) as seen:
        count, staged = await flow.release([KeyRef(client, "k")], 10, ahead)
    assert (count, [p.message.message_id for p in staged]) == (1, [first])
    assert [one for one in seen if one in RELEASES] == [RELEASE_LOOKED]

    await finish(db, first)
    ahead = await flow.look([KeyRef(client, "k")], 10)
    assert ahead is not None and ahead.jobs == []
    [second] = await add(db, held(client, 1))
    with statements(db) as seen:
        count, staged = await flow.release([KeyRef(client, "k")], 10, ahead)
    assert (count, [p.message.message_id for p in staged]) == (1, [second])
    assert [one for one in seen if one in RELEASES] == [LOOK, RELEASE_LOOKED]
