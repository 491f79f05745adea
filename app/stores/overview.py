"""The overview's reads (services/overview): each one statement over an index, whose rows are few whatever the
table holds: counts grouped in SQL, time buckets from app/models/buckets.py, at most `limit` rows of a type."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, func, or_, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.statuses import TERMINAL, JobStatus
from app.models.buckets import EpochBucket
from app.models.job import FINISHED_WHERE, RETRYING_WHERE
from app.models.tables import ATTEMPTS, DELIVERIES, ENDPOINTS, JOB_EVENTS, JOBS
from app.stores.owned import owned_by

S = JobStatus
MINUTE = 60
HOUR = 3600
FINISHED = text(FINISHED_WHERE)  # the partial indexes' own text, so the planner matches it
TERMINAL_STATUSES = sorted(str(status) for status in TERMINAL)


async def status_type_counts(conn: AsyncConnection, scope: str | None) -> Sequence[Row[str, str, int]]:
    """(status, job_type, n) of every job `scope` sees: ix_jobs_client_status_type, read alone."""
    query = (
        select(JOBS.c.status, JOBS.c.job_type, func.count())
        .where(owned_by(JOBS, scope))
        .group_by(JOBS.c.status, JOBS.c.job_type)
    )
    return (await conn.execute(query)).all()


async def status_counts(conn: AsyncConnection, scope: str | None, statuses: Sequence[str]) -> Sequence[Row[str, int]]:
    """(status, n) of the jobs `scope` sees in `statuses`: a range of ix_jobs_status_next (an admin's) or of
    ix_jobs_client_status_type (a client's), read alone."""
    query = (
        select(JOBS.c.status, func.count())
        .where(JOBS.c.status.in_(list(statuses)), owned_by(JOBS, scope))
        .group_by(JOBS.c.status)
    )
    return (await conn.execute(query)).all()


async def finished_per_minute(
    conn: AsyncConnection, scope: str | None, since: datetime
) -> Sequence[Row[str, int, int]]:
    """(status, minute, n) of the jobs that finished since `since`: a range of ix_jobs_status_finished."""
    minute = EpochBucket(JOBS.c.finished_at, MINUTE)
    query = (
        select(JOBS.c.status, minute, func.count())
        .where(FINISHED, JOBS.c.status.in_(TERMINAL_STATUSES), JOBS.c.finished_at >= since, owned_by(JOBS, scope))
        .group_by(JOBS.c.status, minute)
    )
    return (await conn.execute(query)).all()


async def submitted_per_minute(conn: AsyncConnection, scope: str | None, since: datetime) -> Sequence[Row[int, int]]:
    """(minute, n) of the jobs created since `since`: a range of ix_jobs_created (ix_jobs_client_created)."""
    minute = EpochBucket(JOBS.c.created_at, MINUTE)
    query = select(minute, func.count()).where(JOBS.c.created_at >= since, owned_by(JOBS, scope)).group_by(minute)
    return (await conn.execute(query)).all()


async def retries_per_minute(conn: AsyncConnection, scope: str | None, since: datetime) -> Sequence[Row[int, int]]:
    """(minute, n) of the failed attempts that were retried since `since`: ix_job_events_retrying."""
    minute = EpochBucket(JOB_EVENTS.c.created_at, MINUTE)
    query = select(minute, func.count()).where(text(RETRYING_WHERE), JOB_EVENTS.c.created_at >= since)
    if scope is not None:
        query = query.join_from(JOB_EVENTS, JOBS, JOBS.c.id == JOB_EVENTS.c.job_id).where(JOBS.c.client_id == scope)
    return (await conn.execute(query.group_by(minute))).all()


async def dead_per_hour(conn: AsyncConnection, scope: str | None, since: datetime) -> Sequence[Row[int, int]]:
    """(hour, n) of the jobs dead-lettered since `since` that are dead still (a replayed one left the DLQ)."""
    hour = EpochBucket(JOBS.c.finished_at, HOUR)
    query = (
        select(hour, func.count())
        .where(FINISHED, JOBS.c.status == S.DEAD_LETTERED, JOBS.c.finished_at >= since, owned_by(JOBS, scope))
        .group_by(hour)
    )
    return (await conn.execute(query)).all()


async def latest_runs(
    conn: AsyncConnection, scope: str | None, job_type: str, since: datetime, limit: int
) -> Sequence[Row[Any, Any, Any, Any]]:
    """(created_at, run_at, started_at, finished_at) of the last `limit` runs of `job_type` that finished since
    `since`, newest first: ix_jobs_type_finished, read backwards."""
    query = (
        select(JOBS.c.created_at, JOBS.c.run_at, JOBS.c.started_at, JOBS.c.finished_at)
        .where(
            FINISHED,
            JOBS.c.job_type == job_type,
            JOBS.c.finished_at >= since,
            JOBS.c.started_at.is_not(None),
            owned_by(JOBS, scope),
        )
        .order_by(JOBS.c.finished_at.desc())
        .limit(limit)
    )
    return (await conn.execute(query)).all()


def _failed_attempt() -> ColumnElement[bool]:
    return or_(ATTEMPTS.c.status_code.is_(None), ATTEMPTS.c.status_code < 200, ATTEMPTS.c.status_code >= 300)


async def failed_attempts(
    conn: AsyncConnection, scope: str | None, since: datetime, limit: int
) -> Sequence[Row[Any, Any, Any, Any]]:
    """(endpoint_id, status_code, error, created_at) of the latest failed attempts to endpoints since `since`,
    newest first: a range of ix_delivery_attempts_created_at."""
    query = (
        select(DELIVERIES.c.endpoint_id, ATTEMPTS.c.status_code, ATTEMPTS.c.error, ATTEMPTS.c.created_at)
        .join_from(ATTEMPTS, DELIVERIES, DELIVERIES.c.id == ATTEMPTS.c.delivery_id)
        .where(
            ATTEMPTS.c.created_at >= since,
            _failed_attempt(),
            DELIVERIES.c.endpoint_id.is_not(None),
            owned_by(DELIVERIES, scope),
        )
        .order_by(ATTEMPTS.c.created_at.desc())
        .limit(limit)
    )
    return (await conn.execute(query)).all()


async def endpoints(conn: AsyncConnection, scope: str | None) -> Sequence[Row[Any, Any, Any, Any, Any]]:
    """(id, url, active, failing_since, disabled_reason) of the endpoints `scope` sees, not deleted."""
    query = select(
        ENDPOINTS.c.id, ENDPOINTS.c.url, ENDPOINTS.c.active, ENDPOINTS.c.failing_since, ENDPOINTS.c.disabled_reason
    ).where(and_(ENDPOINTS.c.deleted_at.is_(None), owned_by(ENDPOINTS, scope)))
    return (await conn.execute(query)).all()
