"""Concurrency keys and rate limits on every database SQLAlchemy speaks (PostgreSQL, SQLite, MSSQL by rendering).

Every decision about a key is taken under its `flow_keys` row, locked by an UPDATE (keys locked in one order, so two
admissions never wait for each other in a circle). A key's slots are counted, not stored: its unfinished jobs that
run with a live lease, or hold a fresh grant (`granted_run` = `runs` + 1, younger than a lease) that their claim has
not used yet. So a job's outcome frees its slot in the transaction that records it (rule 19), and a dead worker's
slot frees as its lease runs out. A rate window counts its `flow_starts` rows younger than its period."""

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, and_, case, delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import Names
from app.core.statuses import HeldReason, JobStatus, TrailEvent
from app.models.claims import insert_missing, locked_in_order
from app.models.rows import JobRow, job_row
from app.models.tables import FLOW_KEYS, FLOW_STARTS, JOB_EVENTS, JOBS
from app.models.types import utcnow
from app.stores.flow import Admission, KeyCounts, KeyRef
from app.stores.jobs.holds import lane_messages
from app.stores.outbox import OutboxStore, Pending

S = JobStatus
C = JOBS.c
LIVE = [str(s) for s in (S.PENDING, S.QUEUED, S.RETRYING, S.RUNNING)]
CONCURRENCY, RATE = HeldReason.CONCURRENCY, HeldReason.RATE
KEY_COLUMN = {CONCURRENCY: C.concurrency_key, RATE: C.rate_key}
Lock = tuple[str, str, str]  # (kind, client_id, key): a flow_keys row


class Hold(NamedTuple):
    """Why a job may not start now: its reason, its key, and (for a rate window) when it may."""

    reason: HeldReason
    key: str
    until: datetime | None = None


def _ready(job: JobRow, now: datetime) -> bool:
    """Whether the job waits to start now: its next claim would run it."""
    status, due, lease = job["status"], job["next_attempt_at"], job["lease_until"]
    if status in (S.PENDING, S.QUEUED):
        return True
    if status == S.RETRYING:
        return due is None or due <= now
    return status == S.RUNNING and lease is not None and lease < now


def _granted(job: JobRow, since: datetime) -> bool:
    """Whether the job holds a fresh grant for its next run (a release admitted it: its message is on its way)."""
    at = job["granted_at"]
    return job["granted_run"] == job["runs"] + 1 and at is not None and at > since


def _locks(job: JobRow) -> list[Lock]:
    pairs = ((CONCURRENCY, job["concurrency_key"]), (RATE, job["rate_key"]))
    return [(str(kind), job["client_id"], key) for kind, key in pairs if key is not None]


def _of_key(reason: HeldReason, client_id: str, key: str) -> ColumnElement[bool]:
    """A client's unfinished jobs of one key (the partial index's rows)."""
    return and_(C.client_id == client_id, KEY_COLUMN[reason] == key, C.finished_at.is_(None))


def _occupying(now: datetime, since: datetime) -> ColumnElement[bool]:
    """Jobs holding a slot: running with a live lease, or granted one their claim has not used yet."""
    running = and_(C.status == str(S.RUNNING), C.lease_until > now)
    return or_(running, and_(C.granted_run == C.runs + 1, C.granted_at > since, C.status.in_(LIVE)))


class SqlFlow:
    def __init__(self, engine: AsyncEngine, names: Names, outbox: OutboxStore, lease_seconds: float) -> None:
        self.engine = engine
        self.names = names
        self.outbox = outbox
        self.lease = timedelta(seconds=lease_seconds)

    async def admit(self, job_ids: list[str]) -> Admission:
        """See FlowStore.admit."""
        now = utcnow()
        since = now - self.lease
        async with self.engine.begin() as conn:
            rows = await conn.execute(select(*JOBS.c).where(C.id.in_(job_ids)).order_by(C.created_at, C.id))
            jobs = [job_row(row._mapping) for row in rows]
            todo = [j for j in jobs if j["held"] is None and _ready(j, now) and not _granted(j, since) and _locks(j)]
            if not todo:
                return Admission()
            await _lock(conn, [lock for job in todo for lock in _locks(job)])
            plain = [job for job in todo if job["rate_key"] is None]
            held, room = await self._admit_plain(conn, plain, now)
            for job in todo:
                if job["rate_key"] is None:
                    continue
                hold = await self._decide(conn, job, now, ordered=True)
                if hold is None:
                    await self._grant(conn, job, now)
                elif await self._hold(conn, job, hold, now):
                    held[job["id"]] = hold
                    room.add(KeyRef(job["client_id"], job["concurrency_key"] or ""))
            freed = [j for ref in sorted(room) if ref.key for j in await self._release_key(conn, ref, now, len(todo))]
            staged = await self.outbox.stage(conn, lane_messages(self.names, freed))
        windows = [hold.until for hold in held.values() if hold.until is not None]
        return Admission(set(held), staged, min(windows, default=None))

    async def _admit_plain(
        self, conn: AsyncConnection, jobs: list[JobRow], now: datetime
    ) -> tuple[dict[str, Hold], set[KeyRef]]:
        """Admit jobs with a concurrency key alone, set-wise (their keys locked): one read of every key's slots in
        use and jobs waiting, the grants in one UPDATE, the holds in another. Oldest first, each key's jobs take its
        free slots unless older ones wait. The jobs held, and the keys that may still have room for a held job
        (their waiting jobs older than these: the release takes them in order)."""
        if not jobs:
            return {}, set()
        refs = {KeyRef(job["client_id"], job["concurrency_key"] or "") for job in jobs}
        counts = await _key_counts(conn, refs, now, now - self.lease)
        grants, holds = [], []
        for job in jobs:
            ref = KeyRef(job["client_id"], job["concurrency_key"] or "")
            taken, waiting = counts.get(ref, (0, 0))
            if taken < (job["concurrency_limit"] or 0) and waiting == 0:
                grants.append(job["id"])
                counts[ref] = (taken + 1, waiting)
            else:
                holds.append(job)
                counts[ref] = (taken, waiting + 1)
        await _set_many(conn, grants, {"granted_run": C.runs + 1, "granted_at": now})
        held = await _set_many(conn, [job["id"] for job in holds], {"held": str(CONCURRENCY), "held_until": None})
        await _throttled(conn, [job for job in holds if job["id"] in held], CONCURRENCY, now)
        room = {ref for ref, (taken, waiting) in counts.items() if waiting and taken < _limit_of(jobs, ref)}
        return {job["id"]: Hold(CONCURRENCY, job["concurrency_key"] or "") for job in holds if job["id"] in held}, room

    async def release(self, keys: Sequence[KeyRef] | None, limit: int) -> tuple[int, list[Pending]]:
        """See FlowStore.release."""
        now = utcnow()
        async with self.engine.connect() as conn:  # most passes find nothing: reads, not a write transaction
            refs = sorted(set(keys)) if keys is not None else await _held_keys(conn, limit)
            windows = await conn.execute(select(C.id).where(C.held == str(RATE), C.held_until <= now).limit(1))
            window_due = windows.first() is not None
        released, staged = 0, []
        for ref in refs:
            async with self.engine.begin() as conn:
                await _lock(conn, [(str(CONCURRENCY), ref.client_id, ref.key)])
                freed = await self._release_key(conn, ref, now, limit)
                staged += await self.outbox.stage(conn, lane_messages(self.names, freed))
                released += len(freed)
        if window_due:
            async with self.engine.begin() as conn:
                freed = await self._release_windows(conn, now, limit)
                staged += await self.outbox.stage(conn, lane_messages(self.names, freed))
                released += len(freed)
        return released, staged

    async def next_window(self) -> datetime | None:
        """See FlowStore.next_window."""
        async with self.engine.connect() as conn:
            query = select(func.min(C.held_until)).where(C.held == str(RATE), C.finished_at.is_(None))
            upcoming: datetime | None = (await conn.execute(query)).scalar()
            return upcoming

    async def counts(self, client_id: str, key: str) -> KeyCounts:
        """See FlowStore.counts."""
        now = utcnow()
        mine = _of_key(CONCURRENCY, client_id, key)
        running = select(func.count()).where(mine, _occupying(now, now - self.lease))
        waiting = select(func.count()).where(mine, C.held == str(CONCURRENCY))
        async with self.engine.connect() as conn:
            return KeyCounts((await conn.execute(running)).scalar_one(), (await conn.execute(waiting)).scalar_one())

    async def _decide(self, conn: AsyncConnection, job: JobRow, now: datetime, ordered: bool) -> Hold | None:
        """None: the job may start now. Else why not. `ordered`: a job that has not waited yet goes behind the
        held jobs of its keys (a released one was the oldest of them)."""
        client, key, limit = job["client_id"], job["concurrency_key"], job["concurrency_limit"]
        if key is not None and limit is not None:
            mine = _of_key(CONCURRENCY, client, key)
            taken = select(func.count()).where(mine, _occupying(now, now - self.lease)).scalar_subquery()
            waiting = select(func.count()).where(mine, C.held == str(CONCURRENCY)).scalar_subquery()
            row = (await conn.execute(select(taken, waiting))).one()
            if row[0] >= limit or (ordered and row[1] > 0):
                return Hold(CONCURRENCY, key)
        rate_key = job["rate_key"]
        if rate_key is not None:
            until = await _window(conn, job, now)
            if until is None and ordered and await _waiting(conn, RATE, client, rate_key):
                until = now  # the window has room, but older jobs of the key wait for it: after them
            if until is not None:
                return Hold(RATE, rate_key, until)
        return None

    async def _grant(self, conn: AsyncConnection, job: JobRow, now: datetime) -> JobRow | None:
        """Grant the job its next run (a slot, a start of its window) and clear its hold: the job as it is now, or
        None if it changed since it was read (its message is then judged by the claim as ever)."""
        values = {"held": None, "held_until": None, "granted_run": job["runs"] + 1, "granted_at": now}
        moved = await _set(conn, job, values)
        if moved is not None and job["rate_key"] is not None and job["rate_period"] is not None:
            client, key = job["client_id"], job["rate_key"]
            await conn.execute(insert(FLOW_STARTS).values(client_id=client, key=key, started_at=now))
            old = FLOW_STARTS.c.started_at <= now - timedelta(seconds=job["rate_period"])
            mine = and_(FLOW_STARTS.c.client_id == client, FLOW_STARTS.c.key == key)
            await conn.execute(delete(FLOW_STARTS).where(mine, old))
        return moved

    async def _hold(self, conn: AsyncConnection, job: JobRow, hold: Hold, now: datetime) -> bool:
        """Hold the job for `hold` (its audit row `throttled` the first time it is held back). False: it changed."""
        if await _set(conn, job, {"held": str(hold.reason), "held_until": hold.until}) is None:
            return False
        await _throttled(conn, [job], hold.reason, now)
        return True

    async def _release_key(self, conn: AsyncConnection, ref: KeyRef, now: datetime, limit: int) -> list[JobRow]:
        """The oldest jobs held for this key's slots, granted while slots are free (the key locked by the caller);
        one whose rate window is full is held for that instead."""
        mine = and_(_of_key(CONCURRENCY, ref.client_id, ref.key), C.held == str(CONCURRENCY))
        rows = await conn.execute(select(*JOBS.c).where(mine).order_by(C.created_at, C.id).limit(limit))
        return await self._release_in_order([job_row(row._mapping) for row in rows], conn, now)

    async def _release_windows(self, conn: AsyncConnection, now: datetime, limit: int) -> list[JobRow]:
        """The oldest jobs held for a rate window that may have room now, granted while their windows have it."""
        due = and_(C.held == str(RATE), C.held_until <= now, C.finished_at.is_(None))
        rows = await conn.execute(select(*JOBS.c).where(due).order_by(C.created_at, C.id).limit(limit))
        jobs = [job_row(row._mapping) for row in rows]
        await _lock(conn, [lock for job in jobs for lock in _locks(job)])
        return await self._release_in_order(jobs, conn, now)

    async def _release_in_order(self, jobs: list[JobRow], conn: AsyncConnection, now: datetime) -> list[JobRow]:
        """Grant each job in turn; once a key makes one wait, the later jobs of that key wait too (they keep their
        order), held for what stops them."""
        freed: list[JobRow] = []
        stopped: set[Lock] = set()
        for job in jobs:
            keys = set(_locks(job))
            if keys & stopped:
                continue
            await _lock(conn, [lock for lock in keys if lock[0] == str(RATE)])  # a job released for its slot's window
            hold = await self._decide(conn, job, now, ordered=False)
            if hold is None:
                granted = await self._grant(conn, job, now)
                freed += [granted] if granted is not None else []
                continue
            stopped |= keys
            if hold.reason != job["held"] or hold.until != job["held_until"]:
                await self._hold(conn, job, hold, now)
        return freed


async def _lock(conn: AsyncConnection, locks: Iterable[Lock]) -> None:
    """Lock these keys' rows until the transaction ends (each made the first time): one read that locks them in one
    order on every database that has row locks, then one UPDATE that takes SQLite's write lock (and makes each
    lock a write on every database)."""
    wanted = sorted(set(locks))
    if not wanted:
        return
    keys = FLOW_KEYS.c
    match = or_(*(and_(keys.kind == kind, keys.client_id == client, keys.key == key) for kind, client, key in wanted))
    ordered = select(keys.kind, keys.client_id, keys.key).where(match).order_by(keys.client_id, keys.kind, keys.key)
    found = {(row.kind, row.client_id, row.key) for row in await conn.execute(locked_in_order(ordered, FLOW_KEYS))}
    for kind, client_id, key in wanted:
        if (kind, client_id, key) not in found:  # the key's first admission: its row made (and locked by it)
            row = {"client_id": client_id, "kind": kind, "key": key, "version": 0}
            await conn.execute(insert_missing(conn.dialect.name, FLOW_KEYS, row))
    await conn.execute(update(FLOW_KEYS).where(match).values(version=keys.version + 1))


async def _set(conn: AsyncConnection, job: JobRow, values: dict[str, Any]) -> JobRow | None:
    """A compare-and-set of flow columns on the job as read: not run since (its runs), its hold as read, not
    finished or cancelled meanwhile. (Its seq may have moved: the API's pending -> queued step races every first
    admission, and changes nothing that matters here.) The job as it is now, or None."""
    same = and_(C.id == job["id"], C.runs == job["runs"], C.status.in_(LIVE))
    held = C.held.is_(None) if job["held"] is None else C.held == job["held"]
    row = (await conn.execute(update(JOBS).where(same, held).values(values).returning(*JOBS.c))).first()
    return job_row(row._mapping) if row is not None else None


async def _waiting(conn: AsyncConnection, reason: HeldReason, client_id: str, key: str) -> bool:
    """Whether jobs of this key are held for it now."""
    query = select(C.id).where(_of_key(reason, client_id, key), C.held == str(reason)).limit(1)
    return (await conn.execute(query)).first() is not None


async def _window(conn: AsyncConnection, job: JobRow, now: datetime) -> datetime | None:
    """None if the job's rate window has a start left now; else when its oldest start leaves the window."""
    limit, period = job["rate_starts"] or 1, timedelta(seconds=job["rate_period"] or 0)
    starts = FLOW_STARTS.c
    mine = and_(starts.client_id == job["client_id"], starts.key == job["rate_key"], starts.started_at > now - period)
    newest = select(starts.started_at).where(mine).order_by(starts.started_at.desc()).limit(limit)
    recent = list((await conn.execute(newest)).scalars())
    return recent[-1] + period if len(recent) >= limit else None


async def _held_keys(conn: AsyncConnection, limit: int) -> list[KeyRef]:
    """Concurrency keys with held jobs (the level-triggered release's sweep)."""
    query = (
        select(C.client_id, C.concurrency_key)
        .where(C.held == str(CONCURRENCY), C.finished_at.is_(None))
        .group_by(C.client_id, C.concurrency_key)
        .order_by(C.client_id, C.concurrency_key)
        .limit(limit)
    )
    return [KeyRef(row.client_id, row.concurrency_key) for row in await conn.execute(query)]


def _limit_of(jobs: list[JobRow], ref: KeyRef) -> int:
    """The limit the newest of these jobs of the key gives it."""
    limits = [j["concurrency_limit"] or 0 for j in jobs if (j["client_id"], j["concurrency_key"]) == ref]
    return limits[-1] if limits else 0


async def _key_counts(
    conn: AsyncConnection, refs: set[KeyRef], now: datetime, since: datetime
) -> dict[KeyRef, tuple[int, int]]:
    """Each key's slots in use and jobs waiting for one, in one read."""
    match = or_(*(and_(C.client_id == ref.client_id, C.concurrency_key == ref.key) for ref in sorted(refs)))
    taken = func.sum(case((_occupying(now, since), 1), else_=0))
    waiting = func.sum(case((C.held == str(CONCURRENCY), 1), else_=0))
    query = (
        select(C.client_id, C.concurrency_key, taken, waiting)
        .where(match, C.finished_at.is_(None))
        .group_by(C.client_id, C.concurrency_key)
    )
    return {KeyRef(row[0], row[1]): (int(row[2] or 0), int(row[3] or 0)) for row in await conn.execute(query)}


async def _set_many(conn: AsyncConnection, ids: list[str], values: dict[str, Any]) -> set[str]:
    """Set flow columns on these jobs while they wait to start unheld (not finished, cancelled or held meanwhile:
    the keys they wait on are locked, so nothing else admits them): the ids set."""
    if not ids:
        return set()
    guard = and_(C.id.in_(ids), C.held.is_(None), C.status.in_(LIVE))
    return set((await conn.execute(update(JOBS).where(guard).values(values).returning(C.id))).scalars())


async def _throttled(conn: AsyncConnection, jobs: list[JobRow], reason: HeldReason, now: datetime) -> None:
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
