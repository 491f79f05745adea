"""Status changes: compare-and-set for one job or many, their audit rows and their outbox events, in the
caller's transaction. Every status change of a job goes through `move_many` (`move` is its one-row form)."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import BindParameter, ColumnElement, Update, bindparam, case, insert, literal, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.broker import Outgoing
from app.core.messages import job_event
from app.core.names import Names
from app.core.statuses import JobStatus, sources_of
from app.models import pg_batch
from app.models.rows import JobRow, job_row, job_with
from app.models.setwise import per_row
from app.models.tables import JOB_EVENTS, JOBS
from app.models.types import utcnow
from app.services import outbox
from app.services.outbox import Pending

EVENTS = JOB_EVENTS
# Built once: parameters travel beside the statement, so SQLAlchemy reuses its compiled form.
INSERT_EVENT = insert(EVENTS)

Row = dict[str, Any]


# A job's times never go backwards: each status change is stamped with now, or with the job's last change if that
# is later. Two processes' clocks are read before their statements wait for each other (a worker's claim takes
# its time, then waits for the row lock of the API's pending -> queued step, stamped later): the later commit takes
# the earlier stamp. `stamped` is the rule in Python, for a move from a row as read (its seq guards that it is still
# so); `stamp` in SQL, for a statement that moves rows it has not read; pg_batch writes it `greatest(...)`.
def stamped(job: JobRow, now: datetime) -> datetime:
    """When a move of `job` (as last read) made at `now` happened, for its row, audit row and event."""
    last: datetime = job["updated_at"]
    return last if last > now else now


def stamp(now: datetime | BindParameter[datetime]) -> ColumnElement[datetime]:
    """`stamped` in SQL: the moved row's new `updated_at`."""
    at = now if isinstance(now, BindParameter) else literal(now, JOBS.c.updated_at.type)
    return case((JOBS.c.updated_at > at, JOBS.c.updated_at), else_=at)


NOW = bindparam("now", type_=JOBS.c.updated_at.type)
QUEUE_PENDING = (
    update(JOBS)
    .where(JOBS.c.id.in_(bindparam("ids", expanding=True)), JOBS.c.status == JobStatus.PENDING)
    .values(status=str(JobStatus.QUEUED), seq=JOBS.c.seq + 1, updated_at=stamp(NOW))
    .returning(*JOBS.c)
)


def _column(job: JobRow, name: str) -> Any:
    return cast(Row, job).get(name)


class Move(NamedTuple):
    """A status change made by a compare-and-set, not yet in the audit trail: from where, the job after it."""

    source: str
    after: JobRow
    detail: Row


@dataclass(frozen=True)
class Change:
    """One job's part of a move: the job as last read (with its seq), its new values, its audit detail."""

    job: JobRow
    values: Row = field(default_factory=dict)
    detail: Row = field(default_factory=dict)


async def audit(conn: AsyncConnection, job_id: str, event: str, detail: dict[str, Any], at: datetime) -> None:
    """Append one row to a job's audit trail."""
    await conn.execute(INSERT_EVENT, {"job_id": job_id, "event": event, "detail": detail, "created_at": at})


async def audit_many(conn: AsyncConnection, rows: list[Row]) -> None:
    """Append many rows (job_id, event, detail, created_at) to audit trails, one statement."""
    if pg_batch.applies(conn):
        await pg_batch.insert_events(conn, rows)
    else:
        await conn.execute(INSERT_EVENT, rows)


async def move(
    conn: AsyncConnection,
    names: Names,
    job: JobRow,
    to: JobStatus,
    *,
    where: tuple[ColumnElement[bool], ...] = (),
    values: Row | None = None,
    detail: Row | None = None,
) -> tuple[JobRow, Pending] | None:
    """Move one job (as last read) to `to`; None when someone else changed it first."""
    moved = await move_many(conn, names, to, [Change(job, values or {}, detail or {})], where=where)
    return moved[0] if moved else None


async def move_many(
    conn: AsyncConnection,
    names: Names,
    to: JobStatus,
    changes: list[Change],
    *,
    where: tuple[ColumnElement[bool], ...] = (),
) -> list[tuple[JobRow, Pending]]:
    """Move every job of `changes` to `to` with one UPDATE; return those it moved, each with its staged event.

    The per-row seq in the WHERE makes this a compare-and-set on each row as read; the status guard keeps
    every change inside the transition table. Audit rows and outbox events go in one statement each.
    """
    return await record(conn, names, await cas_many(conn, to, changes, where=where))


async def cas_many(
    conn: AsyncConnection, to: JobStatus, changes: list[Change], *, where: tuple[ColumnElement[bool], ...] = ()
) -> list[Move]:
    """`move_many`'s UPDATE alone: the moves it made, for the caller to `record` (with others) in this transaction."""
    if not changes:
        return []
    now = utcnow()
    by_id = {c.job["id"]: c for c in changes}
    result = await conn.execute(compare_and_set(to, changes, now, where))
    return [planned(by_id[job_id], to, now) for job_id in result.scalars()]


def planned(change: Change, to: JobStatus, now: datetime) -> Move:
    """The move `change` makes when its compare-and-set takes: the job as it is after it."""
    at = stamped(change.job, now)
    after = job_with(change.job, **change.values, status=str(to), seq=change.job["seq"] + 1, updated_at=at)
    return Move(change.job["status"], after, change.detail)


def compare_and_set(
    to: JobStatus, changes: list[Change], now: datetime, where: tuple[ColumnElement[bool], ...] = ()
) -> Update:
    """The one UPDATE of `move_many`: each row to its own values, guarded by its own seq; RETURNING the ids."""
    by_id = {c.job["id"]: c for c in changes}
    columns = {name for c in changes for name in c.values}
    assignments: dict[str, Any] = {
        name: per_row(JOBS.c.id, JOBS.c[name], {i: c.values.get(name, _column(c.job, name)) for i, c in by_id.items()})
        for name in columns
    }
    seqs = {i: c.job["seq"] for i, c in by_id.items()}
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(list(by_id)), JOBS.c.seq == per_row(JOBS.c.id, JOBS.c.seq, seqs))
        .where(JOBS.c.status.in_([str(s) for s in sources_of(to)]), *where)
        .values(**assignments, status=str(to), seq=JOBS.c.seq + 1, updated_at=stamp(now))
        .returning(JOBS.c.id)
    )


async def record(conn: AsyncConnection, names: Names, moves: list[Move]) -> list[tuple[JobRow, Pending]]:
    """The audit rows and staged events of moves already made, one statement each, whatever the moves were."""
    if not moves:
        return []
    trail, events = trail_of(moves), events_of(names, moves)
    if pg_batch.applies(conn):  # both in one statement
        rows = outbox.rows_of(events, utcnow())
        ids = await pg_batch.insert_events_and_outbox(conn, trail, rows)
        staged = [Pending(i, event) for i, event in zip(ids, events, strict=True)]
    else:
        await audit_many(conn, trail)
        staged = await outbox.add_many(conn, events)
    return list(zip([m.after for m in moves], staged, strict=True))


def trail_of(moves: list[Move]) -> list[Row]:
    """The audit rows (job_id, event, detail, created_at) of moves, one each."""
    return [
        {
            "job_id": m.after["id"],
            "event": m.after["status"],
            "detail": {"from": m.source, "to": m.after["status"], "attempt": m.after["attempts"], **m.detail},
            "created_at": m.after["updated_at"],
        }
        for m in moves
    ]


def events_of(names: Names, moves: list[Move]) -> list[Outgoing]:
    """The events that follow moves, one each."""
    return [job_event(names, m.after, m.after["updated_at"]) for m in moves]


async def queue_pending(conn: AsyncConnection, names: Names, job_ids: list[str]) -> list[tuple[JobRow, Pending]]:
    """pending -> queued once the broker has these jobs' messages, for those nothing moved first."""
    return await record(conn, names, await cas_pending(conn, job_ids))


async def queue_confirmed(
    conn: AsyncConnection, names: Names, job_ids: list[str], confirmed: list[int]
) -> list[Pending]:
    """`queue_pending` for jobs whose messages the broker confirmed, and their outbox rows (`confirmed`) deleted:
    the events it staged. One statement on PostgreSQL."""
    if pg_batch.applies(conn):
        moved = await pg_batch.queue_recorded(conn, sorted(set(job_ids)), utcnow(), names.events_exchange, confirmed)
        return [outbox.staged_event(names.events_exchange, one.event) for one in moved]
    staged = [pending for _, pending in await queue_pending(conn, names, job_ids)]
    await outbox.drop(conn, confirmed)
    return staged


async def cas_pending(conn: AsyncConnection, job_ids: list[str]) -> list[Move]:
    """`queue_pending`'s UPDATE alone. `pending` has one way in and leaves only by a move guarded like this one,
    so the status is the whole compare-and-set; no row needs reading first. Both the confirmation of a publish
    and a worker whose message arrived before that confirmation was recorded come here: whichever commits first
    moves the job."""
    if not job_ids:
        return []
    rows = await conn.execute(QUEUE_PENDING, {"ids": sorted(set(job_ids)), "now": utcnow()})
    return [Move(JobStatus.PENDING, job_row(row._mapping), {}) for row in rows]
