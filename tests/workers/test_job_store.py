"""The job worker's set-based statements (rule 17) on PostgreSQL and SQLite, and rendered for MSSQL: one
batch claims, judges and records many jobs, each row behind its own compare-and-set and fencing check."""

import asyncio
import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import func, insert, select
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import loads
from app.core.names import Names
from app.models.tables import JOB_EVENTS, JOBS, OUTBOX
from app.stores import steps
from app.stores.jobs import JobStore
from app.stores.jobs.moves import Change, compare_and_set
from app.stores.jobs.portable import CLAIM_QUEUED, _claim_due
from app.stores.schedules.sql import due_claim
from app.workers.jobs.batches import THROTTLED, JobBatches
from app.workers.jobs.locks import Held
from app.workers.jobs.outcomes import dead_lettered, succeeded
from app.workers.verdicts import Claimed, Defer, Drop, ToDeadLetters, Verdict
from tests.conftest import NS, REDIS_URL
from tests.support import claim_many as claim_batch
from tests.support import job_batches, make_job, stores_for, wait_for, waiting_on_a_row_lock

NOW = datetime.now(UTC)


def store(engine: AsyncEngine) -> JobStore:
    return stores_for(engine, Names(NS)).jobs


async def claim_many(engine: AsyncEngine, job_ids: list[str]) -> list[Verdict]:
    return await claim_batch(engine, Names(NS), REDIS_URL, job_ids)


async def add(engine: AsyncEngine, *jobs: dict[str, Any]) -> list[str]:
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), list(jobs))
    return [job["id"] for job in jobs]


async def row(engine: AsyncEngine, job_id: str) -> dict[str, Any]:
    async with engine.connect() as conn:
        return dict((await conn.execute(select(JOBS).where(JOBS.c.id == job_id))).one()._mapping)


async def trail(engine: AsyncEngine, job_id: str) -> list[str]:
    query = select(JOB_EVENTS.c.event).where(JOB_EVENTS.c.job_id == job_id).order_by(JOB_EVENTS.c.id)
    async with engine.connect() as conn:
        return list((await conn.execute(query)).scalars())


async def test_one_batch_claims_every_queued_job_and_stages_their_events(engine: AsyncEngine) -> None:
    ids = await add(engine, *(make_job(status="queued", seq=1) for _ in range(20)))
    async with engine.connect() as conn:
        outbox_before = (await conn.execute(select(func.count()).select_from(OUTBOX))).scalar_one()
    verdicts = await claim_many(engine, ids)
    assert all(isinstance(v, Claimed) for v in verdicts)
    claimed = [v.job for v in verdicts if isinstance(v, Claimed)]
    assert [j["id"] for j in claimed] == ids  # request order
    assert {(j["status"], j["attempts"], j["runs"], j["seq"]) for j in claimed} == {("running", 1, 1, 2)}
    stored = await row(engine, ids[0])
    assert (stored["status"], stored["runs"], stored["seq"]) == ("running", 1, 2)
    assert await trail(engine, ids[0]) == ["running"]
    async with engine.connect() as conn:
        outbox_after = (await conn.execute(select(func.count()).select_from(OUTBOX))).scalar_one()
    assert outbox_after - outbox_before == 20  # one running event each, staged in the claim's transaction
    again = await claim_many(engine, ids[:3])
    assert all(isinstance(v, Defer) and 29 < v.seconds <= 30 for v in again)  # leased now: rule 4


async def test_one_batch_judges_every_kind_of_job_as_rule_4_says(engine: AsyncEngine) -> None:
    now = datetime.now(UTC)
    past, future = now - timedelta(seconds=5), now + timedelta(seconds=60)
    jobs = {
        "done": make_job(status="succeeded", seq=3),
        "dead": make_job(status="dead_lettered", seq=3),
        "cancelled": make_job(status="cancelled", seq=1),
        "not_due": make_job(status="retrying", seq=4, attempts=1, runs=1, next_attempt_at=future),
        "due": make_job(status="retrying", seq=4, attempts=1, runs=1, next_attempt_at=past),
        "expired": make_job(status="running", seq=2, attempts=1, runs=1, lease_until=past),
        "spent": make_job(status="running", seq=2, attempts=1, runs=1, max_retries=0, lease_until=past),
        "pending": make_job(status="pending"),
    }
    await add(engine, *jobs.values())
    order = [*jobs, "missing"]
    ids = [jobs[name]["id"] if name in jobs else "no-such-job" for name in order]
    verdicts = dict(zip(order, await claim_many(engine, ids), strict=True))
    assert isinstance(verdicts["done"], Drop) and isinstance(verdicts["cancelled"], Drop)
    assert isinstance(verdicts["missing"], Drop)
    assert verdicts["dead"] == ToDeadLetters([])
    assert isinstance(verdicts["not_due"], Defer) and verdicts["not_due"].seconds > 50
    for name in ("due", "expired"):
        taken = verdicts[name]
        assert isinstance(taken, Claimed) and (taken.job["runs"], taken.job["attempts"]) == (2, 2)
    spent = verdicts["spent"]
    assert isinstance(spent, ToDeadLetters) and len(spent.events) == 1
    spent_row = await row(engine, jobs["spent"]["id"])
    assert (spent_row["status"], spent_row["dead_reason"], spent_row["runs"]) == ("dead_lettered", "worker_lost", 1)
    pending = verdicts["pending"]
    assert isinstance(pending, Claimed) and len(pending.events) == 2  # queued, then running
    assert await trail(engine, jobs["pending"]["id"]) == ["queued", "running"]


async def test_keyed_claims_are_admitted_in_the_claims_own_transaction(engine: AsyncEngine) -> None:
    """A key of limit 2 and four of its jobs in one claim batch beside a job without keys: the oldest two claimed,
    the other two dropped and held in the database with a `throttled` row, the keyless one claimed; one batch."""
    client = "c_" + uuid.uuid4().hex[:12]
    at = [NOW + timedelta(milliseconds=n) for n in range(4)]
    keyed = [
        make_job(at=t, client_id=client, status="queued", seq=1, concurrency_key="k", concurrency_limit=2) for t in at
    ]
    ids = await add(engine, *keyed, make_job(status="queued", seq=1))
    async with job_batches(engine, Names(NS), REDIS_URL) as batches:
        claims = await asyncio.gather(*(batches.claim(job_id, keyed=job_id in ids[:4]) for job_id in ids))
        assert batches.claims.batches == 1
    verdicts = [verdict for verdict, _ in claims]
    assert [type(v).__name__ for v in verdicts] == ["Claimed", "Claimed", "Drop", "Drop", "Claimed"]
    assert {v.why for v in verdicts if isinstance(v, Drop)} == {THROTTLED}
    rows = [await row(engine, job_id) for job_id in ids]
    assert [(r["status"], r["held"]) for r in rows] == [("running", None)] * 2 + [("queued", "concurrency")] * 2 + [
        ("running", None)
    ]
    assert [await trail(engine, job_id) for job_id in ids[2:4]] == [["throttled"], ["throttled"]]


async def test_outcomes_are_recorded_only_where_the_fencing_token_still_holds(engine: AsyncEngine) -> None:
    ids = await add(engine, *(make_job(status="queued", seq=1) for _ in range(3)))
    claimed = [v.job for v in await claim_many(engine, ids) if isinstance(v, Claimed)]
    # Another worker took the third job over (its lease expired): runs moved on, our token is stale.
    taken_over = {**claimed[2], "runs": claimed[2]["runs"] + 1}
    async with engine.begin() as conn:
        await conn.execute(JOBS.update().where(JOBS.c.id == ids[2]).values(runs=taken_over["runs"]))
    error = {"type": "ValueError", "message": "no"}
    outcomes = [succeeded(claimed[0], {"ok": 1}), dead_lettered(claimed[1], error, "permanent_error")]
    recorded, _ = await store(engine).finish([*outcomes, succeeded(claimed[2], {"late": True})])
    assert [staged is not None for staged in recorded] == [True, True, False]
    first, second, third = [await row(engine, job_id) for job_id in ids]
    assert (first["status"], first["result"], first["seq"]) == ("succeeded", {"ok": 1}, 3)
    assert (second["status"], second["dead_reason"], second["error"]) == ("dead_lettered", "permanent_error", error)
    assert (third["status"], third["result"]) == ("running", None)
    assert await trail(engine, ids[0]) == ["running", "succeeded"]


async def test_a_batch_with_one_unstorable_result_fails_only_that_job(engine: AsyncEngine) -> None:
    redis = Redis.from_url(REDIS_URL)
    names = Names(NS)
    async with job_batches(engine, names, REDIS_URL) as batches:
        await _one_unstorable_result(engine, redis, names, batches)


async def _one_unstorable_result(engine: AsyncEngine, redis: Redis, names: Names, batches: JobBatches) -> None:
    ids: list[str] = []
    try:
        ids = await add(engine, *(make_job(status="queued", seq=1) for _ in range(4)))
        claims = await asyncio.gather(*(batches.claim(job_id) for job_id in ids))
        assert all(isinstance(v, Claimed) and lock.held is Held.OURS for v, lock in claims)
        assert batches.claims.batches == 1  # four claims, one transaction
        results: list[Any] = [{"n": 1}, {"n": 2}, {"bad": {1, 2}}, {"n": 4}]  # a set is not JSON
        finishing = [
            batches.finish(succeeded(v.job, result), lock)
            for (v, lock), result in zip(claims, results, strict=True)
            if isinstance(v, Claimed)
        ]
        outcomes = await asyncio.gather(*finishing, return_exceptions=True)
        assert [isinstance(o, Exception) for o in outcomes] == [False, False, True, False]
        statuses = [(await row(engine, job_id))["status"] for job_id in ids]
        assert statuses == ["succeeded", "succeeded", "running", "succeeded"]
        assert batches.finishes.batches == 5  # the batch of four failed, then each item alone

        async def only_the_failed_ones_lock_is_held() -> bool:  # the others are given back in the background
            return await redis.exists(*(names.job_lock_key(job_id) for job_id in ids)) == 1

        await wait_for(only_the_failed_ones_lock_is_held)
        assert await redis.exists(names.job_lock_key(ids[2])) == 1
    finally:
        await redis.delete(*(names.job_lock_key(job_id) for job_id in ids))
        await redis.aclose()


async def test_a_lock_another_worker_holds_defers_a_job_to_take_over_but_not_a_queued_one(engine: AsyncEngine) -> None:
    """The claim and the locks go at once: for a queued job the database's compare-and-set decides (it is the
    truth, rule 3); a job whose lease ran out is taken over only when no live worker holds its lock."""
    redis = Redis.from_url(REDIS_URL)
    names = Names(NS)
    expired = NOW - timedelta(seconds=5)
    ids = await add(
        engine,
        make_job(status="queued", seq=1),
        make_job(status="running", seq=2, attempts=1, runs=1, lease_until=expired),
        make_job(status="running", seq=2, attempts=1, runs=1, lease_until=expired),
    )
    queued, held, _ = ids
    try:
        await redis.set(names.job_lock_key(queued), "another-worker", px=20_000)
        await redis.set(names.job_lock_key(held), "another-worker", px=20_000)
        async with job_batches(engine, names, REDIS_URL) as batches:
            claims = await asyncio.gather(*(batches.claim(job_id) for job_id in ids))

        (on_queued, queued_lock), (on_held, _), (on_free, free_lock) = claims
        assert isinstance(on_queued, Claimed) and queued_lock.held is Held.THEIRS
        assert isinstance(on_held, Defer) and 10 < on_held.seconds <= 20
        assert isinstance(on_free, Claimed) and free_lock.held is Held.OURS and on_free.job["runs"] == 2
        assert [(await row(engine, job_id))["status"] for job_id in ids] == ["running", "running", "running"]
        assert (await row(engine, held))["runs"] == 1  # not taken over
        assert await redis.get(names.job_lock_key(queued)) == b"another-worker"  # not ours to give back
    finally:
        await redis.delete(*(names.job_lock_key(job_id) for job_id in ids))
        await redis.aclose()


def _mssql(statement: Any) -> str:
    return str(statement.compile(dialect=mssql.dialect(), compile_kwargs={"render_postcompile": True}))


def test_the_batch_statements_render_for_mssql_with_output_instead_of_returning() -> None:
    claim = str(CLAIM_QUEUED.compile(dialect=mssql.dialect()))
    assert "OUTPUT inserted.id" in claim and "RETURNING" not in claim
    assert "jobs.id IN (__[POSTCOMPILE_ids])" in claim and "coalesce(jobs.started_at" in claim.lower()
    jobs = [make_job(status="running", seq=s, runs=1) for s in (2, 5)]
    values = [{"result": {"n": i}} for i in range(2)]
    cas = _mssql(compare_and_set(steps.SUCCEED, [Change(j, v) for j, v in zip(jobs, values, strict=True)], NOW))
    assert "OUTPUT inserted.id" in cas and "RETURNING" not in cas
    assert cas.count("CASE jobs.id") == 2  # the per-row result and the per-row seq guard
    assert "SKIP LOCKED" not in cas.upper()
    # The scheduler's claim of due jobs: MSSQL's equivalent of SKIP LOCKED is a table hint on the inner SELECT.
    due = _mssql(_claim_due(NOW, 200))
    assert "FROM jobs WITH (UPDLOCK, READPAST, ROWLOCK)" in due and "SELECT TOP 200 jobs.id" in due
    assert "OUTPUT inserted." in due and "FOR UPDATE" not in due.upper() and "RETURNING" not in due
    schedules = _mssql(due_claim(NOW, 200))
    assert "FROM schedules WITH (UPDLOCK, READPAST, ROWLOCK)" in schedules and "schedules.active = 1" in schedules


async def _times(engine: AsyncEngine, job_id: str) -> list[tuple[str, datetime]]:
    query = select(JOB_EVENTS.c.event, JOB_EVENTS.c.created_at).where(JOB_EVENTS.c.job_id == job_id)
    async with engine.connect() as conn:
        return [(event, at) for event, at in await conn.execute(query.order_by(JOB_EVENTS.c.id))]


def _in_order(times: list[datetime]) -> bool:
    return all(earlier <= later for earlier, later in itertools.pairwise(times))


async def test_a_claim_of_a_pending_job_stamps_its_queued_step_no_later_than_its_running_step(
    engine: AsyncEngine,
) -> None:
    (job_id,) = await add(engine, make_job(status="pending"))
    (verdict,) = await claim_many(engine, [job_id])
    assert isinstance(verdict, Claimed)
    times = await _times(engine, job_id)
    assert [event for event, _ in times] == ["queued", "running"]
    assert _in_order([at for _, at in times]), times
    sent = [loads(p.message.body) for p in verdict.events]
    assert [e["type"] for e in sent] == ["job.queued", "job.running"]
    assert _in_order([datetime.fromisoformat(e["created_at"]) for e in sent]), sent


async def test_a_claim_that_waited_for_a_later_stamped_confirmation_never_goes_back_in_time(db: AsyncEngine) -> None:
    """The worker's claim reads its clock, then waits for the row lock of the API's pending -> queued step, which
    read its clock later: the running step used to be stamped before the queued one, in the trail and the events."""
    jobs = store(db)
    (job_id,) = await add(db, make_job(status="pending"))
    async with db.begin() as confirming:
        await confirming.execute(select(JOBS.c.id).where(JOBS.c.id == job_id).with_for_update())
        claim = asyncio.create_task(claim_many(db, [job_id]))
        await wait_for(lambda: waiting_on_a_row_lock(db), within=10)
        queued_events = await jobs.queue_published(confirming, [job_id], [])
    (verdict,) = await asyncio.wait_for(claim, timeout=10)
    assert isinstance(verdict, Claimed) and verdict.job["seq"] == 2
    ((finished,), _) = await jobs.finish([succeeded(verdict.job, {"ok": True})])
    assert finished is not None

    times = await _times(db, job_id)
    assert [event for event, _ in times] == ["queued", "running", "succeeded"]
    assert _in_order([at for _, at in times]), times
    sent = [loads(p.message.body) for p in [*queued_events, *verdict.events, finished]]
    assert [e["seq"] for e in sent] == [1, 2, 3]
    assert _in_order([datetime.fromisoformat(e["created_at"]) for e in sent]), sent
    assert (await row(db, job_id))["updated_at"] == times[-1][1]
