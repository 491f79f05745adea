"""Status changes: one compare-and-set, its audit row and its outbox event, in the caller's transaction."""

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import job_event
from app.core.names import Names
from app.core.statuses import JobStatus, sources_of
from app.models.tables import JOB_EVENTS, JOBS
from app.models.types import utcnow
from app.services import outbox
from app.services.outbox import Pending

EVENTS = JOB_EVENTS
# Built once: parameters travel beside the statement, so SQLAlchemy reuses its compiled form.
INSERT_EVENT = insert(EVENTS)

Row = dict[str, Any]


async def audit(conn: AsyncConnection, job_id: str, event: str, detail: dict[str, Any], at: datetime) -> None:
    """Append one row to a job's audit trail."""
    await conn.execute(INSERT_EVENT, {"job_id": job_id, "event": event, "detail": detail, "created_at": at})


async def move(
    conn: AsyncConnection,
    names: Names,
    job: Row,
    to: JobStatus,
    *,
    where: tuple[ColumnElement[bool], ...] = (),
    values: Row | None = None,
    detail: Row | None = None,
) -> tuple[Row, Pending] | None:
    """Move `job` (as last read, with its seq) to `to`; None when someone else changed it first.

    The seq in the WHERE makes this a compare-and-set on the row as read; the status guard keeps
    every change inside the transition table.
    """
    now = utcnow()
    changes = {**(values or {}), "status": str(to), "seq": job["seq"] + 1, "updated_at": now}
    result = await conn.execute(
        update(JOBS)
        .where(JOBS.c.id == job["id"], JOBS.c.seq == job["seq"])
        .where(JOBS.c.status.in_([str(s) for s in sources_of(to)]), *where)
        .values(**changes)
    )
    if result.rowcount != 1:
        return None
    after = {**job, **changes}
    trail = {"from": job["status"], "to": str(to), "attempt": after["attempts"], **(detail or {})}
    await audit(conn, job["id"], str(to), trail, now)
    staged = await outbox.add(conn, job_event(names, after, now))
    return after, staged
