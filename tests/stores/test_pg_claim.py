"""The job path's one-statement batches on PostgreSQL (app/stores/jobs/postgres.py): the claim builds each job's
audit row and event in SQL, so they must be the same as the ones the portable store's `record` builds in Python;
the finish writes an outcome's rows only where its run's fencing token held."""

import asyncio
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import job_event, loads
from app.core.names import Names, event_type
from app.core.statuses import JobStatus
from app.models.tables import JOB_EVENTS, JOBS, OUTBOX
from app.stores.jobs import postgres as pg_jobs
from app.stores.jobs import postgres_sql
from app.stores.postgres import PgConnections
from app.workers.jobs.outcomes import succeeded
from app.workers.verdicts import Claimed
from tests.conftest import NS, REDIS_URL
from tests.support import claim_many, make_job, stores_for, wait_for, waiting_on_a_row_lock

NAMES = Names(NS)
# The SQL expression of an event's type, in the statements that build events.
SQL_TYPE = re.compile(r"\"type\":' \|\| to_json\((.+?)\)::text")


async def add(engine: AsyncEngine, *jobs: dict[str, Any]) -> list[str]:
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), list(jobs))
    return [job["id"] for job in jobs]


async def rows_of(engine: AsyncEngine, table: Any, column: Any, ids: list[str]) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        result = await conn.execute(select(table).where(column.in_(ids)).order_by(table.c.id))
        return [dict(row._mapping) for row in result]


def assert_as_python(moved: list[pg_jobs.Recorded], step: tuple[str, str], now: datetime) -> None:
    """Each moved row made the step at `now`, and its staged event is what `job_event` builds in Python."""
    for one in moved:
        assert (one.source, one.row["status"], one.row["updated_at"]) == (*step, now)
        expected = job_event(NAMES, one.row, now)
        outbox_id, key, body, headers, message_id = one.event
        assert body == expected.body  # byte for byte, as Python writes it
        assert (key, headers, message_id) == (expected.routing_key, expected.headers, expected.message_id)
        assert outbox_id > 0


TRICKY = [
    {"payload": {"text": 'quote " backslash \\ newline \n tab \t bell \x07 é 漢字 🙂', "n": [1, 2.5, None, True]}},
    {"request_id": "req-1", "idempotency_key": 'key "one"', "callback_url": "http://127.0.0.1:9/hook?a=1&b=é"},
    {"created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "started_at": datetime(2026, 1, 2, 3, 4, 6, 7, UTC)},
    {"request_id": "", "payload": None, "priority": 9, "max_retries": 0},
    {"error": {"type": "Boom", "message": "once"}, "attempts": 1, "runs": 4, "seq": 7},
]


@pytest.mark.parametrize("microsecond", [0, 123456])
async def test_the_claim_statement_stages_the_events_and_audit_rows_python_builds(
    db: AsyncEngine, microsecond: int
) -> None:
    ids = await add(db, *(make_job(**{"status": "queued", "seq": 1, **extra}) for extra in TRICKY))
    now = datetime(2026, 12, 2, 5, 6, 7, microsecond, tzinfo=UTC)
    async with PgConnections(db, keep=False).autocommit() as conn:
        moved = await pg_jobs.claim_recorded(conn, ids, now, now + timedelta(seconds=30), NAMES.events_exchange)

    assert sorted(one.row["id"] for one in moved) == sorted(ids)
    assert_as_python(moved, ("queued", "running"), now)
    stored = await rows_of(db, OUTBOX, OUTBOX.c.message_id, [one.event[4] for one in moved])
    assert sorted(bytes(r["body"]) for r in stored) == sorted(one.event[2] for one in moved)
    trail = await rows_of(db, JOB_EVENTS, JOB_EVENTS.c.job_id, ids)
    by_job = {one.row["id"]: one.row for one in moved}
    assert [(r["event"], r["created_at"]) for r in trail] == [("running", now)] * len(ids)
    for r in trail:
        detail = r["detail"] if isinstance(r["detail"], dict) else loads(r["detail"])
        assert detail == {"from": "queued", "to": "running", "attempt": by_job[r["job_id"]]["attempts"]}


async def test_the_claim_statement_queues_and_claims_a_pending_job_with_both_steps_and_leaves_a_spent_one(
    db: AsyncEngine,
) -> None:
    pending, spent = await add(
        db,
        make_job(status="pending", request_id="req-7"),
        make_job(status="queued", attempts=4, max_retries=3, seq=5),
    )
    now = datetime.now(UTC)
    async with PgConnections(db, keep=False).autocommit() as conn:
        moved = await pg_jobs.claim_recorded(conn, [pending, spent], now, now, NAMES.events_exchange)
    steps = [(one.row["id"], one.source, one.row["status"], one.row["seq"], one.row["attempts"]) for one in moved]
    assert steps == [(pending, "pending", "queued", 1, 0), (pending, "queued", "running", 2, 1)]
    queued_step, running_step = moved
    assert queued_step.row["started_at"] is None and running_step.row["started_at"] == now
    for one in moved:  # each step's event as Python builds it from the row after that step
        assert one.event[2] == job_event(NAMES, one.row, now).body
    assert queued_step.event[0] < running_step.event[0]  # staged in the order of the steps
    trail = await rows_of(db, JOB_EVENTS, JOB_EVENTS.c.job_id, [pending, spent])
    assert [(r["job_id"], r["event"]) for r in trail] == [(pending, "queued"), (pending, "running")]
    details = [r["detail"] if isinstance(r["detail"], dict) else loads(r["detail"]) for r in trail]
    assert details == [
        {"from": "pending", "to": "queued", "attempt": 0},
        {"from": "queued", "to": "running", "attempt": 1},
    ]
    (row,) = await rows_of(db, JOBS, JOBS.c.id, [spent])
    assert (row["status"], row["seq"]) == ("queued", 5)


async def test_a_batch_with_a_pending_job_claims_it_after_queueing_it_with_both_events(db: AsyncEngine) -> None:
    pending, queued = await add(db, make_job(status="pending"), make_job(status="queued", seq=1))
    verdicts = await claim_many(db, NAMES, REDIS_URL, [pending, queued])
    assert all(isinstance(v, Claimed) for v in verdicts)
    first = verdicts[0]
    assert isinstance(first, Claimed)
    assert [loads(p.message.body)["type"] for p in first.events] == ["job.queued", "job.running"]
    trail = await rows_of(db, JOB_EVENTS, JOB_EVENTS.c.job_id, [pending])
    assert [r["event"] for r in trail] == ["queued", "running"]


async def test_a_claim_that_waited_for_the_confirmation_of_the_same_job_claims_it_after_that_step(
    db: AsyncEngine,
) -> None:
    """The API moves a job pending -> queued when its message is confirmed; the worker may already have the
    message and claim it at that moment. The claim waits for the confirmation's row lock, then takes the job
    as it is now (queued), with no second queued step; it used to read the job as pending, lose the race and
    fall back to a claim of its own in another transaction."""
    (job_id,) = await add(db, make_job(status="pending"))
    now = datetime.now(UTC)
    async with db.begin() as confirming:  # the confirmation holds the row until it commits
        (queued,) = await pg_jobs.queue_recorded(confirming, [job_id], now, NAMES.events_exchange, [])
        async with PgConnections(db, keep=False).autocommit() as conn:
            claim = asyncio.create_task(
                pg_jobs.claim_recorded(conn, [job_id], now, now + timedelta(seconds=30), NAMES.events_exchange)
            )
            await wait_for(lambda: waiting_on_a_row_lock(db), within=10)
            await confirming.commit()
            moved = await asyncio.wait_for(claim, timeout=10)

    assert (queued.source, queued.row["seq"]) == ("pending", 1)
    assert [(one.source, one.row["status"], one.row["seq"], one.row["attempts"]) for one in moved] == [
        ("queued", "running", 2, 1)
    ]
    trail = await rows_of(db, JOB_EVENTS, JOB_EVENTS.c.job_id, [job_id])
    assert [r["event"] for r in trail] == ["queued", "running"]


async def test_a_finish_batch_holding_a_stale_run_of_the_same_job_records_only_the_current_one(
    db: AsyncEngine,
) -> None:
    store = stores_for(db, NAMES).jobs
    (job_id,) = await add(db, make_job(status="queued", seq=1))
    (first,) = await claim_many(db, NAMES, REDIS_URL, [job_id])
    assert isinstance(first, Claimed)
    async with db.begin() as conn:  # the lease ran out and another worker took the job over: runs 2
        await conn.execute(JOBS.update().where(JOBS.c.id == job_id).values(runs=2, seq=3))
    current = {**first.job, "runs": 2, "seq": 3}
    recorded, _ = await store.finish([succeeded(first.job, {"from": "stale"}), succeeded(current, {"ok": 1})])

    assert recorded[0] is None and recorded[1] is not None
    assert loads(recorded[1].message.body)["data"]["job"]["result"] == {"ok": 1}
    (row,) = await rows_of(db, JOBS, JOBS.c.id, [job_id])
    assert (row["status"], row["result"], row["seq"]) == ("succeeded", {"ok": 1}, 4)
    trail = await rows_of(db, JOB_EVENTS, JOB_EVENTS.c.job_id, [job_id])
    assert [r["event"] for r in trail] == ["running", "succeeded"]
    staged = await rows_of(db, OUTBOX, OUTBOX.c.message_id, [recorded[1].message.message_id or ""])
    assert [r["id"] for r in staged] == [recorded[1].id]


async def test_the_confirmation_statement_queues_pending_jobs_with_python_built_events_and_drops_the_rows(
    db: AsyncEngine,
) -> None:
    ids = await add(db, *(make_job(**{"status": "pending", **extra}) for extra in TRICKY))
    running = await add(db, make_job(status="running", seq=2))  # moved on already: left as it is
    async with db.begin() as conn:
        confirmed = [
            int(i)
            for i in (
                await conn.execute(
                    insert(OUTBOX).returning(OUTBOX.c.id),
                    [
                        {
                            "exchange": "x",
                            "routing_key": "k",
                            "body": b"{}",
                            "headers": {},
                            "message_id": job_id,
                            "job_id": job_id,
                            "created_at": datetime.now(UTC),
                        }
                        for job_id in [*ids, *running]
                    ],
                )
            ).scalars()
        ]
    now = datetime(2026, 12, 2, 5, 6, 7, 890, tzinfo=UTC)
    async with PgConnections(db, keep=False).autocommit() as conn:
        moved = await pg_jobs.queue_recorded(conn, [*ids, *running], now, NAMES.events_exchange, confirmed)

    assert sorted(one.row["id"] for one in moved) == sorted(ids)
    assert_as_python(moved, ("pending", "queued"), now)
    assert await rows_of(db, OUTBOX, OUTBOX.c.job_id, [*ids, *running]) == []  # the confirmed rows are gone
    staged = await rows_of(db, OUTBOX, OUTBOX.c.message_id, [one.event[4] for one in moved])
    assert len(staged) == len(ids)
    trail = await rows_of(db, JOB_EVENTS, JOB_EVENTS.c.job_id, [*ids, *running])
    by_job = {one.row["id"]: one.row for one in moved}
    assert [(r["job_id"] in ids, r["event"], r["created_at"]) for r in trail] == [(True, "queued", now)] * len(ids)
    for r in trail:
        detail = r["detail"] if isinstance(r["detail"], dict) else loads(r["detail"])
        assert detail == {"from": "pending", "to": "queued", "attempt": by_job[r["job_id"]]["attempts"]}
    assert [r["status"] for r in await rows_of(db, JOBS, JOBS.c.id, running)] == ["running"]


async def test_the_sql_types_the_event_of_every_status_as_event_type_does(db: AsyncEngine) -> None:
    # The statements that stage events write each one's type in SQL; whatever status it follows, it is Python's.
    found = {
        part for sql in (postgres_sql.CLAIM_RECORDED, postgres_sql.QUEUE_RECORDED) for part in SQL_TYPE.findall(sql)
    }
    assert len(found) == 1, found
    statuses = [str(status) for status in JobStatus]
    query = text(
        f"SELECT to_json({found.pop()})::text "
        "FROM unnest(CAST(:statuses AS varchar[])) WITH ORDINALITY AS m(status, n) ORDER BY m.n"
    )
    async with db.connect() as conn:
        typed = (await conn.execute(query, {"statuses": statuses})).scalars().all()
    assert [loads(one) for one in typed] == [event_type(status) for status in JobStatus]
