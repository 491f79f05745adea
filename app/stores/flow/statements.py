"""The statements and rules of flow control's store (`sql.SqlFlow`), on every database: whether a job waits to start,
holds a grant, which keys it locks (the locks themselves: `locks.py`); the counts of a key's slots; the
compare-and-sets of its flow columns; a rate window's room."""

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, and_, case, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.statuses import HeldReason, JobStatus, TrailEvent
from app.models.rows import JobRow, job_row
from app.models.tables import FLOW_STARTS, JOB_EVENTS, JOBS
from app.stores.flow import KeyRef
from app.stores.flow.locks import Lock

S = JobStatus
C = JOBS.c
LIVE = [str(s) for s in (S.PENDING, S.QUEUED, S.RETRYING, S.RUNNING)]
CONCURRENCY, RATE = HeldReason.CONCURRENCY, HeldReason.RATE
KEY_COLUMN = {CONCURRENCY: C.concurrency_key, RATE: C.rate_key}


class Hold(NamedTuple):
    """Why a job may not start now: its reason, its key, and (for a rate window) when it may."""

    reason: HeldReason
    key: str
    until: datetime | None = None


def ready(job: JobRow, now: datetime) -> bool:
    """Whether the job waits to start now: its next claim would run it."""
    status, due, lease = job["status"], job["next_attempt_at"], job["lease_until"]
    if status in (S.PENDING, S.QUEUED):
        return True
    if status == S.RETRYING:
        return due is None or due <= now
    return status == S.RUNNING and lease is not None and lease < now


def holds_grant(job: JobRow, since: datetime) -> bool:
    """Whether the job holds a fresh grant for its next run (a release admitted it: its message is on its way)."""
    at = job["granted_at"]
    return job["granted_run"] == job["runs"] + 1 and at is not None and at > since


def key_locks(job: Mapping[str, Any]) -> list[Lock]:
    pairs = ((CONCURRENCY, job["concurrency_key"]), (RATE, job["rate_key"]))
    return [(str(kind), job["client_id"], key) for kind, key in pairs if key is not None]


def of_key(reason: HeldReason, client_id: str, key: str) -> ColumnElement[bool]:
    """A client's unfinished jobs of one key (the partial index's rows)."""
    return and_(C.client_id == client_id, KEY_COLUMN[reason] == key, C.finished_at.is_(None))


def occupying(now: datetime, since: datetime) -> ColumnElement[bool]:
    """Jobs holding a slot: running with a live lease, or granted one their claim has not used yet."""
    running = and_(C.status == str(S.RUNNING), C.lease_until > now)
    return or_(running, and_(C.granted_run == C.runs + 1, C.granted_at > since, C.status.in_(LIVE)))


async def set_flow(conn: AsyncConnection, job: JobRow, values: dict[str, Any]) -> JobRow | None:
    """A compare-and-set of flow columns on the job as read: not run since (its runs), its hold as read, not
    finished or cancelled meanwhile. (Its seq may have moved: the API's pending -> queued step races every first
    admission, and changes nothing that matters here.) The job as it is now, or None."""
    same = and_(C.id == job["id"], C.runs == job["runs"], C.status.in_(LIVE))
    held = C.held.is_(None) if job["held"] is None else C.held == job["held"]
    row = (await conn.execute(update(JOBS).where(same, held).values(values).returning(*JOBS.c))).first()
    return job_row(row._mapping) if row is not None else None


async def others_wait(conn: AsyncConnection, reason: HeldReason, client_id: str, key: str) -> bool:
    """Whether jobs of this key are held for it now."""
    query = select(C.id).where(of_key(reason, client_id, key), C.held == str(reason)).limit(1)
    return (await conn.execute(query)).first() is not None


async def window_of(conn: AsyncConnection, job: JobRow, now: datetime) -> datetime | None:
    """None if the job's rate window has a start left now; else when its oldest start leaves the window."""
    limit, period = job["rate_starts"] or 1, timedelta(seconds=job["rate_period"] or 0)
    starts = FLOW_STARTS.c
    mine = and_(starts.client_id == job["client_id"], starts.key == job["rate_key"], starts.started_at > now - period)
    newest = select(starts.started_at).where(mine).order_by(starts.started_at.desc()).limit(limit)
    recent = list((await conn.execute(newest)).scalars())
    return recent[-1] + period if len(recent) >= limit else None


async def held_keys(conn: AsyncConnection, limit: int, among: Iterable[KeyRef] | None = None) -> list[KeyRef]:
    """Concurrency keys with held jobs (the level-triggered release's sweep); `among`: of these keys alone."""
    query = (
        select(C.client_id, C.concurrency_key)
        .where(C.held == str(CONCURRENCY), C.finished_at.is_(None))
        .group_by(C.client_id, C.concurrency_key)
        .order_by(C.client_id, C.concurrency_key)
        .limit(limit)
    )
    if among is not None:
        query = query.where(match_keys(among))
    return [KeyRef(row.client_id, row.concurrency_key) for row in await conn.execute(query)]


def limit_of(jobs: list[JobRow], ref: KeyRef) -> int:
    """The limit the newest of these jobs of the key gives it."""
    limits = [j["concurrency_limit"] or 0 for j in jobs if (j["client_id"], j["concurrency_key"]) == ref]
    return limits[-1] if limits else 0


def match_keys(refs: Iterable[KeyRef]) -> ColumnElement[bool]:
    """The jobs of these concurrency keys."""
    return or_(*(and_(C.client_id == ref.client_id, C.concurrency_key == ref.key) for ref in sorted(set(refs))))


async def key_counts(
    conn: AsyncConnection, refs: set[KeyRef], now: datetime, since: datetime
) -> dict[KeyRef, tuple[int, int]]:
    """Each key's slots in use and jobs waiting for one, in one read."""
    match = match_keys(refs)
    taken = func.sum(case((occupying(now, since), 1), else_=0))
    waiting = func.sum(case((C.held == str(CONCURRENCY), 1), else_=0))
    query = (
        select(C.client_id, C.concurrency_key, taken, waiting)
        .where(match, C.finished_at.is_(None))
        .group_by(C.client_id, C.concurrency_key)
    )
    return {KeyRef(row[0], row[1]): (int(row[2] or 0), int(row[3] or 0)) for row in await conn.execute(query)}


async def set_flow_many(conn: AsyncConnection, ids: list[str], values: dict[str, Any]) -> set[str]:
    """Set flow columns on these jobs while they wait to start unheld (not finished, cancelled or held meanwhile:
    the keys they wait on are locked, so nothing else admits them): the ids set."""
    if not ids:
        return set()
    guard = and_(C.id.in_(ids), C.held.is_(None), C.status.in_(LIVE))
    return set((await conn.execute(update(JOBS).where(guard).values(values).returning(C.id))).scalars())


async def throttled(conn: AsyncConnection, jobs: list[JobRow], reason: HeldReason, now: datetime) -> None:
    """The `throttled` audit row of each of these jobs that has none yet."""
    if not jobs:
        return
    events = JOB_EVENTS.c
    ids = [job["id"] for job in jobs]
    before = select(events.job_id).where(events.job_id.in_(ids), events.event == str(TrailEvent.THROTTLED))
    seen = set((await conn.execute(before)).scalars())
    rows = [
        {
            "job_id": job["id"],
            "event": str(TrailEvent.THROTTLED),
            "created_at": now,
            "detail": {
                "key": job["concurrency_key"] if reason == CONCURRENCY else job["rate_key"],
                "reason": str(reason),
            },
        }
        for job in jobs
        if job["id"] not in seen
    ]
    if rows:
        await conn.execute(insert(JOB_EVENTS), rows)
