"""Held jobs (DESIGN.md rule 18) on PostgreSQL and SQLite: the hold takes only jobs waiting to start, each once,
and only while their type is paused; no claim takes a held job; the release waits for the resume, clears the reason
by compare-and-set and stages the lane message in the same transaction; a cancelled held job is never released; a
hold that commits after a resume's release is released by the next pass; and two releases at once release each
job once. Each test uses a job type of its own, so the jobs of other tests in the same database are never its
concern."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import JobMessage, loads
from app.core.names import Lane, Names
from app.core.statuses import HeldReason, JobStatus
from app.models.tables import JOB_EVENTS, JOBS, OUTBOX
from app.stores import Stores
from app.stores.jobs import holds
from app.workers.verdicts import Drop
from tests.conftest import NS, REDIS_URL
from tests.support import claim_many, drop_jobs, make_job, stores_for

NAMES = Names(NS)
PAUSED = HeldReason.PAUSED
UNKNOWN = HeldReason.UNKNOWN_TYPE
WAITING = ("pending", "queued", "retrying")
PAST = datetime.now(UTC) - timedelta(minutes=5)


@pytest.fixture(autouse=True)
async def unstaged(engine: AsyncEngine) -> AsyncIterator[None]:
    yield
    await drop_jobs(engine, JOBS.c.job_type.like("held-%"))


def a_type() -> str:
    return f"held-{uuid.uuid4().hex[:12]}"


async def paused_type(stores: Stores) -> str:
    """A job type of the test's own, paused (these types are unknown to the service: no release loop sends
    their jobs, so each test's releases are its own)."""
    job_type = a_type()
    await stores.job_types.pause(job_type, datetime.now(UTC))
    return job_type


async def add(engine: AsyncEngine, *jobs: dict[str, Any]) -> list[str]:
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), list(jobs))
    return [job["id"] for job in jobs]


async def column(engine: AsyncEngine, name: str, ids: list[str]) -> dict[str, Any]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(JOBS.c.id, JOBS.c[name]).where(JOBS.c.id.in_(ids)))
        return {row[0]: row[1] for row in rows}


async def held_rows(engine: AsyncEngine, ids: list[str]) -> list[tuple[str, dict[str, Any]]]:
    query = select(JOB_EVENTS.c.job_id, JOB_EVENTS.c.detail).where(
        JOB_EVENTS.c.job_id.in_(ids), JOB_EVENTS.c.event == "held"
    )
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return sorted((job_id, detail if isinstance(detail, dict) else loads(detail)) for job_id, detail in rows)


async def staged_messages(engine: AsyncEngine, ids: list[str]) -> dict[str, list[Any]]:
    query = select(OUTBOX).where(OUTBOX.c.message_id.in_(ids))
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    found: dict[str, list[Any]] = {}
    for row in rows:
        found.setdefault(row.message_id, []).append(row)
    return found


async def queued_jobs(engine: AsyncEngine, job_type: str, n: int, **extra: Any) -> list[str]:
    return await add(engine, *(make_job(job_type=job_type, status="queued", seq=1, **extra) for _ in range(n)))


async def test_a_hold_takes_each_job_waiting_to_start_once_and_nothing_else(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    jobs, job_type = stores.jobs, await paused_type(stores)
    by_status = {
        status: make_job(job_type=job_type, status=str(status), seq=2, next_attempt_at=PAST) for status in JobStatus
    }
    ids = await add(engine, *by_status.values())
    waiting = sorted(by_status[JobStatus(status)]["id"] for status in WAITING)

    assert sorted(await jobs.hold(ids, PAUSED)) == waiting
    assert sorted(await jobs.hold(ids, PAUSED)) == waiting  # held already: held still, not held twice

    held = await column(engine, "held", ids)
    assert sorted(job_id for job_id, reason in held.items() if reason == "paused") == waiting
    assert sorted(job_id for job_id, reason in held.items() if reason is None) == sorted(set(ids) - set(waiting))
    assert await held_rows(engine, ids) == [(job_id, {"reason": "paused"}) for job_id in waiting]
    statuses = await column(engine, "status", ids)
    assert statuses == {job["id"]: job["status"] for job in by_status.values()}  # not a status change
    seqs = await column(engine, "seq", ids)
    assert set(seqs.values()) == {2}


async def test_a_run_whose_lease_ran_out_is_held_and_a_live_one_is_not(engine: AsyncEngine) -> None:
    """A paused type's job whose worker died mid-run does not start again while paused: its redelivered message,
    once the lease is out, holds it (rule 4 drops its messages meanwhile); the release sends it back."""
    stores = stores_for(engine, NAMES)
    jobs, job_type = stores.jobs, await paused_type(stores)
    future = datetime.now(UTC) + timedelta(minutes=5)
    dead, live = await add(
        engine,
        make_job(job_type=job_type, status="running", seq=2, attempts=1, lease_until=PAST, fencing_token=1),
        make_job(job_type=job_type, status="running", seq=2, attempts=1, lease_until=future, fencing_token=1),
    )
    assert await jobs.hold([dead, live], PAUSED) == {dead}
    verdicts = await claim_many(engine, NAMES, REDIS_URL, [dead])
    assert [type(v) for v in verdicts] == [Drop], verdicts
    assert await column(engine, "status", [dead]) == {dead: "running"}

    await stores.job_types.resume(job_type)
    released, staged = await jobs.release([job_type], 10)
    assert [job["id"] for job in released] == [dead]
    assert [item.message.message_id for item in staged] == [dead]


async def test_no_claim_takes_a_held_job(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    jobs, job_type = stores.jobs, await paused_type(stores)
    queued = await queued_jobs(engine, job_type, 1)
    pending = await add(engine, make_job(job_type=job_type, status="pending"))
    retrying = await add(engine, make_job(job_type=job_type, status="retrying", seq=3, next_attempt_at=PAST))
    ids = [*queued, *pending, *retrying]
    assert await jobs.hold(ids, PAUSED) == set(ids)

    claimed = (await jobs.claim(ids)).moved  # the common claim, one statement on PostgreSQL
    assert [job["id"] for job, _ in claimed if job["status"] == "running"] == []
    verdicts = await claim_many(engine, NAMES, REDIS_URL, ids)  # the whole claim batch, rule 4 included
    assert [type(v) for v in verdicts] == [Drop, Drop, Drop], verdicts
    assert all("held" in v.why for v in verdicts if isinstance(v, Drop))
    assert await column(engine, "runs", ids) == dict.fromkeys(ids, 0)


async def test_the_release_waits_for_the_resume_then_stages_each_lane_message(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    job_type = await paused_type(stores)
    queued = await queued_jobs(engine, job_type, 2)
    retrying = await add(engine, make_job(job_type=job_type, status="retrying", seq=3, attempts=2, priority=1))
    ids = [*queued, *retrying]
    try:
        await stores.jobs.hold(ids, PAUSED)
        assert await stores.jobs.release([job_type], 200) == ([], [])  # still paused
    finally:
        await stores.job_types.resume(job_type)

    released, staged = await stores.jobs.release([job_type], 200)

    assert sorted(job["id"] for job in released) == sorted(ids)
    assert {job["held"] for job in released} == {None}
    assert set((await column(engine, "held", ids)).values()) == {None}
    assert sorted(p.message.message_id or "" for p in staged) == sorted(ids)
    by_id = {p.message.message_id: p.message for p in staged}
    assert by_id[queued[0]].routing_key == NAMES.lane_key(Lane.DEFAULT)
    assert by_id[retrying[0]].routing_key == NAMES.lane_key(Lane.CRITICAL)
    assert by_id[retrying[0]].headers["retry-count"] == 2
    assert JobMessage.from_bytes(by_id[queued[0]].body).job_type == job_type
    assert {job_id: len(rows) for job_id, rows in (await staged_messages(engine, ids)).items()} == dict.fromkeys(ids, 1)
    assert await stores.jobs.release([job_type], 200) == ([], [])  # released once


async def test_a_release_takes_at_most_its_limit_oldest_first(engine: AsyncEngine) -> None:
    """As the subquery of an UPDATE, a `LIMIT ... SKIP LOCKED` read may be run again for the rows the UPDATE has
    changed: the release then took every held job of the type, whatever its limit."""
    stores = stores_for(engine, NAMES)
    job_type = await paused_type(stores)
    base = datetime.now(UTC)
    ids = await add(
        engine,
        *(
            make_job(job_type=job_type, status="queued", seq=1, created_at=base + timedelta(milliseconds=n))
            for n in range(5)
        ),
    )
    try:
        await stores.jobs.hold(ids, PAUSED)
    finally:
        await stores.job_types.resume(job_type)

    first, staged = await stores.jobs.release([job_type], 2)
    rest, _ = await stores.jobs.release([job_type], 200)

    assert [job["id"] for job in first] == ids[:2] and len(staged) == 2
    assert sorted(job["id"] for job in rest) == sorted(ids[2:])


async def test_a_cancelled_held_job_is_never_released(engine: AsyncEngine) -> None:
    stores = stores_for(engine, NAMES)
    job_type = await paused_type(stores)
    kept, cancelled = await queued_jobs(engine, job_type, 2)
    await stores.jobs.hold([kept, cancelled], PAUSED)
    async with stores.jobs.transaction() as conn:
        job = (await stores.jobs.read(conn, [cancelled]))[cancelled]
        moved = await stores.jobs.cancel(conn, job)
    assert moved is not None and moved[0]["status"] == "cancelled"
    assert await column(engine, "held", [kept, cancelled]) == {kept: "paused", cancelled: None}
    await stores.job_types.resume(job_type)

    released, _ = await stores.jobs.release([job_type], 200)

    assert [job["id"] for job in released] == [kept]
    assert list(await staged_messages(engine, [kept, cancelled])) == [kept]


async def test_a_hold_of_a_type_resumed_meanwhile_does_not_take(engine: AsyncEngine) -> None:
    """A worker that has not read the resume yet asks to hold: the hold reads the pauses itself, so the job runs."""
    stores = stores_for(engine, NAMES)
    job_type = await paused_type(stores)
    (job_id,) = await queued_jobs(engine, job_type, 1)
    await stores.job_types.resume(job_type)

    assert await stores.jobs.hold([job_id], PAUSED) == set()
    assert await column(engine, "held", [job_id]) == {job_id: None}
    assert await held_rows(engine, [job_id]) == []


async def test_a_hold_that_commits_after_the_resumes_release_is_released_by_the_next_pass(db: AsyncEngine) -> None:
    """On PostgreSQL, a hold under way (its transaction open) while the type is resumed and the resume's release
    pass runs and finds nothing: the release is level-triggered, so the next pass sends the job."""
    stores = stores_for(db, NAMES)
    job_type = await paused_type(stores)
    (job_id,) = await queued_jobs(db, job_type, 1)
    async with db.begin() as conn:
        held, _ = await holds.hold(conn, [job_id], PAUSED)
        assert held == {job_id}
        await stores.job_types.resume(job_type)
        assert await stores.jobs.release([job_type], 200) == ([], [])  # the resume's pass: the hold is not in
    assert await column(db, "held", [job_id]) == {job_id: "paused"}  # committed after it

    released, staged = await stores.jobs.release([job_type], 200)

    assert [job["id"] for job in released] == [job_id]
    assert [p.message.message_id for p in staged] == [job_id]


async def test_two_releases_at_once_release_each_job_once(engine: AsyncEngine) -> None:
    first, second = stores_for(engine, NAMES), stores_for(engine, NAMES)
    job_type = await paused_type(first)
    ids = await queued_jobs(engine, job_type, 60)
    await first.jobs.hold(ids, PAUSED)
    await first.job_types.resume(job_type)

    async def drain(stores: Stores) -> list[str]:
        taken: list[str] = []
        while released := (await stores.jobs.release([job_type], 7))[0]:
            taken += [job["id"] for job in released]
        return taken

    a, b = await asyncio.gather(drain(first), drain(second))

    assert sorted(a + b) == sorted(ids)
    assert {job_id: len(rows) for job_id, rows in (await staged_messages(engine, ids)).items()} == dict.fromkeys(ids, 1)


async def test_a_type_its_worker_lacks_is_held_on_its_word_and_released_only_for_that_reason(
    engine: AsyncEngine,
) -> None:
    """A job worker without a plugin holds its type's jobs (`unknown_type`, with a note for the dashboard); a release
    of paused types' holds leaves them; a worker that has the type releases them, unless the type is paused."""
    stores = stores_for(engine, NAMES)
    job_type = a_type()
    ids = await queued_jobs(engine, job_type, 2)

    assert await stores.jobs.hold(ids, UNKNOWN) == set(ids)

    [(_, detail), _] = await held_rows(engine, ids)
    assert detail["reason"] == "unknown_type" and "no handler for its type" in detail["note"]
    assert await stores.jobs.release([job_type], 200) == ([], [])  # a pause's release: not these
    await stores.job_types.pause(job_type, datetime.now(UTC))
    try:
        assert await stores.jobs.release([job_type], 200, UNKNOWN) == ([], [])  # paused: a worker would hold again
    finally:
        await stores.job_types.resume(job_type)
    released, staged = await stores.jobs.release([job_type], 200, UNKNOWN)
    assert sorted(job["id"] for job in released) == sorted(ids)
    assert sorted(p.message.message_id or "" for p in staged) == sorted(ids)
    assert set((await column(engine, "held", ids)).values()) == {None}


async def test_a_pause_is_kept_once_and_the_counts_are_the_clients(engine: AsyncEngine) -> None:
    types = stores_for(engine, NAMES).job_types
    job_type, client = a_type(), f"c-{uuid.uuid4().hex[:8]}"
    first, later = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    await types.pause(job_type, first)
    await types.pause(job_type, later)
    assert (await types.paused())[job_type] == first
    await types.resume(job_type)
    await types.resume(job_type)
    assert job_type not in await types.paused()

    statuses = ["pending", "queued", "queued", "running", "succeeded"]
    await add(engine, *(make_job(job_type=job_type, client_id=client, status=s) for s in statuses))
    await add(engine, make_job(job_type=job_type, status="queued"))  # another client's
    counted = (JobStatus.PENDING, JobStatus.QUEUED, JobStatus.RUNNING)

    mine = await types.counts(client, counted)
    everyone = await types.counts(None, counted)

    assert {key: n for key, n in mine.items() if key[0] == job_type} == {
        (job_type, JobStatus.PENDING): 1,
        (job_type, JobStatus.QUEUED): 2,
        (job_type, JobStatus.RUNNING): 1,
    }
    assert everyone[(job_type, JobStatus.QUEUED)] == 3


def test_the_hold_and_the_release_render_for_mssql_with_output_and_a_lock_hint() -> None:
    hold = str(holds.HOLD[PAUSED].compile(dialect=mssql.dialect()))
    assert "OUTPUT inserted.id" in hold and "RETURNING" not in hold and "jobs.held IS NULL" in hold
    assert "jobs.job_type IN (SELECT job_type_pauses.job_type" in hold
    rendered = {"dialect": mssql.dialect(), "compile_kwargs": {"render_postcompile": True}}
    due = str(holds.due_statement(["echo", "sleep"], 200, PAUSED).compile(**rendered))  # type: ignore[arg-type]
    release = str(holds.release_statement(["echo", "sleep"], PAUSED).compile(dialect=mssql.dialect()))
    assert "FROM jobs WITH (UPDLOCK, READPAST, ROWLOCK)" in due and "SELECT TOP 200 jobs.id" in due
    assert "OUTPUT inserted." in release and "RETURNING" not in release and "FOR UPDATE" not in release.upper()
    assert "jobs.job_type NOT IN (SELECT job_type_pauses.job_type" in release
    unknown = str(holds.HOLD[UNKNOWN].compile(dialect=mssql.dialect()))
    assert "OUTPUT inserted.id" in unknown and unknown.endswith("jobs.held IS NULL")  # on its word: no condition
