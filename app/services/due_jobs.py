"""Scheduled jobs whose time has come: one statement claims a batch of them (scheduled -> queued), and their
messages and events go out through the outbox, committed with the claim."""

from datetime import datetime

from sqlalchemy import ColumnElement, Update, and_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import metrics
from app.core.messages import JobMessage, job_outgoing
from app.core.names import Names
from app.core.statuses import JobStatus, can_move
from app.models.claims import skip_locked
from app.models.rows import JobRow, job_row
from app.models.tables import JOBS
from app.models.types import utcnow
from app.services import outbox as outbox_rows
from app.services.outbox import Outbox
from app.services.transitions import Move, record, stamp

S = JobStatus
assert can_move(S.SCHEDULED, S.QUEUED)


def _due(now: datetime) -> ColumnElement[bool]:
    return and_(JOBS.c.status == S.SCHEDULED, JOBS.c.next_attempt_at <= now)


def claim_due(now: datetime, limit: int) -> Update:
    """The due scheduled jobs, oldest time first, moved to queued in one UPDATE that returns them. The inner
    SELECT passes over rows another scheduler holds (`skip_locked`); the outer status guard makes it a
    compare-and-set on every dialect."""
    due = select(JOBS.c.id).where(_due(now)).order_by(JOBS.c.next_attempt_at).limit(limit)
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(skip_locked(due, JOBS)), JOBS.c.status == S.SCHEDULED)
        .values(status=str(S.QUEUED), seq=JOBS.c.seq + 1, updated_at=stamp(now), next_attempt_at=None)
        .returning(*JOBS.c)
    )


async def queue_due(engine: AsyncEngine, names: Names, outbox: Outbox, limit: int) -> list[JobRow]:
    """Queue up to `limit` due jobs: claim, audit rows, events and lane messages in one transaction, then publish
    (what the broker does not confirm, the relay sends). Returns the jobs queued."""
    now = utcnow()
    async with engine.connect() as conn:  # most cycles find nothing due: a read, not a write transaction
        if (await conn.execute(select(JOBS.c.id).where(_due(now)).limit(1))).first() is None:
            return []
    async with engine.begin() as conn:
        jobs = [job_row(row._mapping) for row in await conn.execute(claim_due(now, limit))]
        if not jobs:
            return []
        events = [staged for _, staged in await record(conn, names, [Move(S.SCHEDULED, job, {}) for job in jobs])]
        messages = await outbox_rows.add_many(conn, [job_outgoing(names, JobMessage.from_row(job)) for job in jobs])
    for job in jobs:  # queued when committed: the lag is counted then, not after the publish
        due = job["run_at"] or now
        metrics.scheduler_lag(metrics.DELAYED).observe(max(0.0, (now - due).total_seconds()))
    await outbox.publish([*messages, *events])
    return jobs
