"""Held jobs (DESIGN.md rule 18), on any database: a job waiting to start is held back in the database with its
reason (`jobs.held`) while its message is acked, and released, once its reason has passed, by one compare-and-set
that clears the reason with its lane message staged in the same transaction, like a scheduled job that comes due.
Neither is a status change: a held job keeps its status (pending, queued, retrying, or running with its lease
run out, its worker dead) and its seq."""

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import ColumnElement, Select, Update, and_, bindparam, or_, select, true, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.broker import Outgoing
from app.core.messages import JobMessage, job_outgoing
from app.core.names import Names
from app.core.statuses import HOLDABLE, HeldReason, JobStatus, TrailEvent
from app.models.claims import skip_locked
from app.models.rows import JobRow, TrailRow, job_row
from app.models.tables import JOB_TYPE_PAUSES, JOBS
from app.models.types import utcnow

# Waiting to start: a status of HOLDABLE, or a run whose lease ran out (its worker died; the next run is a start).
_WAITING = or_(
    JOBS.c.status.in_([str(status) for status in HOLDABLE]),
    and_(JOBS.c.status == str(JobStatus.RUNNING), JOBS.c.lease_until < bindparam("now", type_=JOBS.c.lease_until.type)),
)
# A held job to release: waiting still (a held run's lease ran out, unless a late renewal came: its message is then
# judged by rule 4 like any other), not finished or cancelled meanwhile.
_UNFINISHED = JOBS.c.status.in_([str(status) for status in (*HOLDABLE, JobStatus.RUNNING)])
# The jobs held now (a job that finished while held, its run outliving its lease, keeps a stale reason: not these).
HELD_NOW = and_(JOBS.c.held.is_not(None), _UNFINISHED)
# What each reason is, read at the hold itself: a worker's view of the paused types may lag the database by a
# refresh, so the hold takes only while its reason still stands (a job whose type was resumed meanwhile runs).
# A job of a type the worker has no handler for is held on that worker's word (docs/plugins.md).
_STANDS = {
    HeldReason.PAUSED: JOBS.c.job_type.in_(select(JOB_TYPE_PAUSES.c.job_type)),
    HeldReason.UNKNOWN_TYPE: true(),
}
# What the audit trail says of a hold besides its reason, where the reason alone does not say what to do.
NOTES = {
    HeldReason.UNKNOWN_TYPE: "the job worker that took it has no handler for its type (a plugin not installed "
    "there); it waits, queued, until a job worker that has the type runs (docs/plugins.md)",
}
HOLD = {
    reason: update(JOBS)
    .where(JOBS.c.id.in_(bindparam("ids", expanding=True)), _WAITING, JOBS.c.held.is_(None), stands)
    .values(held=str(reason))
    .returning(JOBS.c.id)
    for reason, stands in _STANDS.items()
}
HELD_BEFORE = select(JOBS.c.id).where(
    JOBS.c.id.in_(bindparam("ids", expanding=True)), _WAITING, JOBS.c.held.is_not(None)
)


async def hold(conn: AsyncConnection, job_ids: list[str], reason: HeldReason) -> tuple[set[str], list[TrailRow]]:
    """Hold the jobs among `job_ids` that wait to start and are not held yet, while `reason` stands (one UPDATE):
    the ids held now, by this statement or before it, and the `held` audit rows of those it held. A job in any
    other status, or whose reason has passed, is left as it is (its message goes the usual way)."""
    ids = sorted(set(job_ids))
    if not ids:
        return set(), []
    now = utcnow()
    newly = set((await conn.execute(HOLD[reason], {"ids": ids, "now": now})).scalars())
    rest = [job_id for job_id in ids if job_id not in newly]
    before = set((await conn.execute(HELD_BEFORE, {"ids": rest, "now": now})).scalars()) if rest else set()
    detail = {"reason": str(reason)} | ({"note": NOTES[reason]} if reason in NOTES else {})
    trail: list[TrailRow] = [
        {"job_id": job_id, "event": TrailEvent.HELD, "detail": detail, "created_at": now} for job_id in sorted(newly)
    ]
    return newly | before, trail


def released(job_types: Sequence[str], reason: HeldReason = HeldReason.PAUSED) -> ColumnElement[bool]:
    """Held jobs whose reason has passed, among the jobs of `job_types`, their type not paused (any more): held for
    a pause, or (`UNKNOWN_TYPE`) by a worker without their type, when the caller is a worker that has them.
    (`job_types` narrows the scan to the index's entries of those types; the subquery is the truth.)"""
    paused = select(JOB_TYPE_PAUSES.c.job_type)
    return and_(
        JOBS.c.held == str(reason),
        JOBS.c.job_type.in_(list(job_types)),
        JOBS.c.job_type.not_in(paused),
        _UNFINISHED,
    )


async def any_released(conn: AsyncConnection, job_types: Sequence[str], reason: HeldReason) -> bool:
    """Whether a held job of `job_types` may be released now: one read, most often of no index entry at all."""
    if not job_types:
        return False
    query = select(JOBS.c.id).where(released(job_types, reason)).limit(1)
    return (await conn.execute(query)).first() is not None


def due_statement(job_types: Sequence[str], limit: int, reason: HeldReason) -> Select[Any]:
    """Up to `limit` released jobs, oldest first, locked for the caller's transaction; rows another release holds
    are passed over (`skip_locked`). A read of its own: as the subquery of the UPDATE, PostgreSQL may run it again
    for the rows the UPDATE has already changed, and release every held job of the types whatever the limit."""
    due = select(JOBS.c.id).where(released(job_types, reason)).order_by(JOBS.c.created_at).limit(limit)
    return skip_locked(due, JOBS)


def release_statement(job_types: Sequence[str], reason: HeldReason) -> Update:
    """The release of the jobs `ids` (bound): their reason cleared by one UPDATE that returns them, a
    compare-and-set on every dialect, so a job cancelled or held again meanwhile is left alone."""
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(bindparam("ids", expanding=True)), released(job_types, reason))
        .values(held=None)
        .returning(*JOBS.c)
    )


async def release_in_order(conn: AsyncConnection, due: Select[Any], release: Update) -> list[JobRow]:
    """A release of held jobs in two statements: `due` reads (and locks) their ids in order, then `release`, a
    compare-and-set on `ids`, clears their hold and returns them; the jobs as they are now, in `due`'s order."""
    ids = list((await conn.execute(due)).scalars())
    if not ids:
        return []
    order = {job_id: place for place, job_id in enumerate(ids)}  # RETURNING keeps no order on every database
    rows = [job_row(row._mapping) for row in await conn.execute(release, {"ids": ids})]
    return sorted(rows, key=lambda job: order[job["id"]])


async def take_released(
    conn: AsyncConnection, job_types: Sequence[str], limit: int, reason: HeldReason
) -> list[JobRow]:
    """The jobs released (up to `limit`, oldest first), as they are now."""
    if not job_types:
        return []
    due = due_statement(job_types, limit, reason)
    return await release_in_order(conn, due, release_statement(job_types, reason))


def lane_messages(
    names: Names, jobs: list[JobRow], fair: bool = False, grant_seconds: float | None = None
) -> list[Outgoing]:
    """The lane message of each released job (a retry's with its attempts so far, as the relay's net sends it);
    `fair`: released in its client's turn, so its claim releases the next (stores/flow/fair.py); `grant_seconds`:
    released by flow control with a grant that holds its slot that long (its claim then needs no admission)."""
    return [
        job_outgoing(
            names,
            replace(JobMessage.from_row(job, grant_seconds), fair=fair),
            job["attempts"] if job["status"] == JobStatus.RETRYING else 0,
        )
        for job in jobs
    ]
