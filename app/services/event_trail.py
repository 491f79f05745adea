"""Job events read back from the audit trail, for a stream that reconnects with `Last-Event-ID`.

An event's id is `evt_<job id>_<seq>` (messages.event_id) and every status change writes one audit row named after
its new status (the stores' `record`), so a job's n-th status row is its event of seq n; seq 0 is its `created` row.
"""

import re
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, RowMapping, case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.messages import job_event
from app.core.names import Names
from app.core.statuses import TERMINAL, JobStatus, TrailEvent
from app.models.rows import JobRow, job_row, job_with
from app.models.tables import JOB_EVENTS as EVENTS
from app.models.tables import JOBS
from app.services.live import LiveEvent
from app.services.tenancy import Principal, visible_to

STATUS_ROWS = [str(status) for status in JobStatus]
PAGE_ROWS = 500
# A progress event's id adds `_p<ms>` (messages.progress_event): a reconnect after it resumes after its seq.
EVENT_ID = re.compile(r"^evt_([0-9a-f]{32})_(\d{1,9})(?:_p\d{1,15})?$")


@dataclass(frozen=True)
class EventRef:
    """Which event an id names: a job and a seq."""

    job_id: str
    seq: int


def parse_event_id(value: str | None) -> EventRef | None:
    """The event an id such as a `Last-Event-ID` names; None when it names none."""
    found = EVENT_ID.match(value.strip()) if value else None
    return EventRef(str(uuid.UUID(found[1])), int(found[2])) if found else None


def as_event(names: Names, job: JobRow) -> LiveEvent:
    """A job's latest event, from its row: the same JSON its live event carried."""
    return LiveEvent.of(job_event(names, job, job["updated_at"]).body)


@dataclass(frozen=True)
class Trail:
    """One status row of a job's audit trail."""

    row: int
    status: str
    detail: dict[str, Any]
    at: datetime


@dataclass
class History:
    """What a job's trail says before the rows at hand: its status changes so far, the row of its first run."""

    seq: int = 0
    first_run: int | None = None


def _past(job: JobRow, trail: Trail, seq: int, history: History) -> JobRow:
    """The job as it was at its change `seq`, as far as the trail tells: that status, attempts and time, a start
    only from its first run on, a result and finish only once finished; the rest as the job is now."""
    if seq == job["seq"]:
        return job
    then: dict[str, Any] = {}
    if history.first_run is None or trail.row < history.first_run:
        then["started_at"] = None
    if trail.status not in TERMINAL:
        then.update(result=None, finished_at=None)
    attempts = trail.detail.get("attempt", job["attempts"])
    return job_with(job, **then, status=trail.status, seq=seq, attempts=attempts, updated_at=trail.at)


def _trail(row: Mapping[Any, Any]) -> Trail:
    return Trail(row["trail_id"], row["event"], row["detail"], row["trail_at"])


TRAIL_COLUMNS = (EVENTS.c.id.label("trail_id"), EVENTS.c.event, EVENTS.c.detail, EVENTS.c.created_at.label("trail_at"))


async def job_events_after(engine: AsyncEngine, names: Names, job: JobRow, after_seq: int) -> list[LiveEvent]:
    """The job's events of seq above `after_seq`, oldest first."""
    query = (
        select(*TRAIL_COLUMNS)
        .where(EVENTS.c.job_id == job["id"], EVENTS.c.event.in_(STATUS_ROWS))
        .order_by(EVENTS.c.id)
    )
    async with engine.connect() as conn:
        trail = [_trail(row) for row in (await conn.execute(query)).mappings()]
    history = History(first_run=next((t.row for t in trail if t.status == JobStatus.RUNNING), None))
    return [as_event(names, _past(job, t, seq, history)) for seq, t in enumerate(trail, start=1) if seq > after_seq]


async def _anchor(conn: AsyncConnection, ref: EventRef) -> int | None:
    """The audit row of the event `ref` names."""
    query = (
        select(EVENTS.c.id)
        .where(EVENTS.c.job_id == ref.job_id, EVENTS.c.event.in_([*STATUS_ROWS, str(TrailEvent.CREATED)]))
        .order_by(EVENTS.c.id)
        .offset(ref.seq)
        .limit(1)
    )
    found: int | None = (await conn.execute(query)).scalar()
    return found


def _page_query(principal: Principal, job_type: str | None, after_row: int) -> Any:
    where: list[ColumnElement[bool]] = [
        EVENTS.c.id > after_row,
        EVENTS.c.event.in_(STATUS_ROWS),
        visible_to(JOBS, principal),
    ]
    if job_type:
        where.append(JOBS.c.job_type == job_type)
    return (
        select(*JOBS.c, *TRAIL_COLUMNS)
        .join(JOBS, JOBS.c.id == EVENTS.c.job_id)
        .where(*where)
        .order_by(EVENTS.c.id)
        .limit(PAGE_ROWS)
    )


async def _histories(conn: AsyncConnection, job_ids: set[str], before_row: int) -> dict[str, History]:
    """Per job: its status changes in the trail before `before_row`, and the row of its first run."""
    running = case((EVENTS.c.event == str(JobStatus.RUNNING), EVENTS.c.id))
    query = (
        select(EVENTS.c.job_id, func.sum(case((EVENTS.c.id < before_row, 1), else_=0)), func.min(running))
        .where(EVENTS.c.job_id.in_(sorted(job_ids)), EVENTS.c.event.in_(STATUS_ROWS))
        .group_by(EVENTS.c.job_id)
    )
    return {job_id: History(int(seq or 0), first_run) for job_id, seq, first_run in await conn.execute(query)}


def _page_events(names: Names, rows: Sequence[RowMapping], histories: dict[str, History]) -> list[LiveEvent]:
    events = []
    for row in rows:
        job = job_row({column.name: row[column.name] for column in JOBS.c})
        history = histories.setdefault(job["id"], History())
        history.seq += 1
        events.append(as_event(names, _past(job, _trail(row), history.seq, history)))
    return events


async def events_after(
    engine: AsyncEngine, names: Names, principal: Principal, ref: EventRef, job_type: str | None
) -> AsyncIterator[list[LiveEvent]]:
    """Every event of the caller's jobs (of `job_type`) recorded after the one `ref` names, a page at a time;
    nothing when the trail holds no such event."""
    async with engine.connect() as conn:
        after_row = await _anchor(conn, ref)
    while after_row is not None:
        async with engine.connect() as conn:
            rows = (await conn.execute(_page_query(principal, job_type, after_row))).mappings().all()
            if not rows:
                return
            histories = await _histories(conn, {row["id"] for row in rows}, rows[0]["trail_id"])
        yield _page_events(names, rows, histories)
        after_row = rows[-1]["trail_id"] if len(rows) == PAGE_ROWS else None
