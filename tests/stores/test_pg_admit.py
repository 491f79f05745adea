"""A claim batch with keyed jobs on PostgreSQL (app/stores/jobs/postgres_admit.py): once a key has its row, its
jobs are admitted and claimed by one statement; a decision on the key that committed after that statement's
snapshot leaves them to the admission in a transaction of its own, which sees it."""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.models.tables import FLOW_KEYS, JOB_EVENTS, JOBS
from app.stores.flow.postgres import LOCK_WAITING
from app.stores.jobs.postgres_admit import ADMIT_AND_CLAIM
from app.workers.jobs.batches import THROTTLED
from app.workers.verdicts import Claimed, Drop
from tests.conftest import NS, REDIS_URL
from tests.stores.test_pg_claim import add
from tests.support import job_batches, make_job, statements, wait_for, waiting_on_a_row_lock

NAMES = Names(NS)
NOW = datetime.now(UTC)


def keyed_job(client: str, n: int = 0, limit: int = 2, **columns: Any) -> dict[str, Any]:
    columns = {"status": "queued", "seq": 1, **columns}
    return make_job(
        at=NOW + timedelta(milliseconds=n), client_id=client, concurrency_key="k", concurrency_limit=limit, **columns
    )


async def columns(db: AsyncEngine, ids: list[str], *names: str) -> list[tuple[Any, ...]]:
    async with db.connect() as conn:
        rows = {r.id: r for r in await conn.execute(select(JOBS).where(JOBS.c.id.in_(ids)))}
    return [tuple(getattr(rows[job_id], name) for name in names) for job_id in ids]


async def version(db: AsyncEngine, client: str) -> int:
    async with db.connect() as conn:
        query = select(FLOW_KEYS.c.version).where(FLOW_KEYS.c.client_id == client, FLOW_KEYS.c.key == "k")
        return int((await conn.execute(query)).scalar_one())


async def test_a_key_with_its_row_is_admitted_and_claimed_by_one_statement(db: AsyncEngine, client: str) -> None:
    """Four jobs of a key of limit 2 beside a keyless job: the oldest two claimed with no grant written (running,
    they hold their slots), the other two held with a `throttled` row, the keyless one claimed; one statement,
    and the key's version bumped once."""
    ids = await add(db, *(keyed_job(client, n) for n in range(4)), make_job(status="queued", seq=1))
    with statements(db) as seen:
        async with job_batches(db, NAMES, REDIS_URL) as batches:
            claims = await asyncio.gather(*(batches.claim(job_id, keyed=job_id in ids[:4]) for job_id in ids))
    verdicts = [verdict for verdict, _ in claims]

    assert seen == [ADMIT_AND_CLAIM]
    assert [type(v).__name__ for v in verdicts] == ["Claimed", "Claimed", "Drop", "Drop", "Claimed"]
    assert {v.why for v in verdicts if isinstance(v, Drop)} == {THROTTLED}
    assert await columns(db, ids, "status", "held", "granted_run") == [
        ("running", None, None),
        ("running", None, None),
        ("queued", "concurrency", None),
        ("queued", "concurrency", None),
        ("running", None, None),
    ]
    async with db.connect() as conn:
        query = select(JOB_EVENTS.c.job_id, JOB_EVENTS.c.event).where(JOB_EVENTS.c.job_id.in_(ids[2:4]))
        assert sorted(tuple(r) for r in await conn.execute(query)) == sorted((i, "throttled") for i in ids[2:4])
    assert await version(db, client) == 1


async def test_a_decision_on_the_key_after_the_statements_snapshot_leaves_the_job_to_a_transaction(
    db: AsyncEngine, client: str
) -> None:
    """Another transaction holds the key's row and starts a run of the key (limit 1) while the claim statement
    waits for that row: the statement's snapshot does not see the run, so it must not decide the key. The job is
    admitted again in a transaction that does see it, and held."""
    [job_id] = await add(db, keyed_job(client, limit=1))
    async with db.connect() as other:
        await other.execute(text("UPDATE flow_keys SET version = version + 1 WHERE client_id = :c"), {"c": client})
        lease = datetime.now(UTC) + timedelta(minutes=5)
        running = keyed_job(client, n=-1, limit=1, status="running", runs=1, attempts=1, lease_until=lease)
        await other.execute(insert(JOBS).values(running))
        with statements(db) as seen:
            async with job_batches(db, NAMES, REDIS_URL) as batches:
                claim = asyncio.create_task(batches.claim(job_id, keyed=True))
                await wait_for(lambda: waiting_on_a_row_lock(db), within=10)
                await other.commit()
                verdict, _ = await claim

    assert isinstance(verdict, Drop) and verdict.why == THROTTLED, verdict
    assert await columns(db, [job_id], "status", "held") == [("queued", "concurrency")]
    assert [one for one in seen if one in (ADMIT_AND_CLAIM, LOCK_WAITING)] == [ADMIT_AND_CLAIM, LOCK_WAITING]
    assert await version(db, client) == 3  # the other transaction's bump, the statement's, the admission's


async def test_a_due_retry_granted_by_the_statement_holds_its_grant_until_the_claim_takes_it_over(
    db: AsyncEngine, client: str
) -> None:
    """A due retry is not the claim statement's to take (its status is not pending or queued): granted there, it
    is taken over by the claim's next step, and a second job of the key, in the same batch, waits."""
    past = NOW - timedelta(seconds=5)
    retry = keyed_job(client, 0, limit=1, status="retrying", seq=3, runs=1, attempts=1, next_attempt_at=past)
    ids = await add(db, retry, keyed_job(client, 1, limit=1))
    async with job_batches(db, NAMES, REDIS_URL) as batches:
        verdicts = [v for v, _ in await batches.claim_batch(ids, set(ids))]

    assert isinstance(verdicts[0], Claimed) and verdicts[0].job["runs"] == 2
    assert isinstance(verdicts[1], Drop) and verdicts[1].why == THROTTLED
    assert await columns(db, ids, "status", "held", "granted_run") == [
        ("running", None, 2),
        ("queued", "concurrency", None),
    ]
