"""Concurrency keys and rate limits on every database SQLAlchemy speaks (PostgreSQL, SQLite, MSSQL by rendering).

Every decision about a key is taken under its `flow_keys` row, locked by an UPDATE (keys locked in one order, so two
admissions never wait for each other in a circle). A key's slots are counted, not stored: its unfinished jobs that
run with a live lease, or hold a fresh grant (`granted_run` = `runs` + 1, younger than a lease) that their claim has
not used yet. So a job's outcome frees its slot in the transaction that records it (rule 19), and a dead worker's
slot frees as its lease runs out. A rate window counts its `flow_starts` rows younger than its period."""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.broker import Outgoing
from app.core.names import Names
from app.models.rows import JobRow, job_row
from app.models.tables import FLOW_STARTS, JOBS
from app.models.types import utcnow
from app.stores.flow import Admission, KeyCounts, KeyRef, Looked
from app.stores.flow.locks import Lock, lock_keys
from app.stores.flow.statements import (
    CONCURRENCY,
    LIVE,
    RATE,
    C,
    Hold,
    held_keys,
    holds_grant,
    key_counts,
    key_locks,
    limit_of,
    match_keys,
    occupying,
    of_key,
    others_wait,
    ready,
    set_flow,
    set_flow_many,
    throttled,
    window_of,
)
from app.stores.jobs.holds import lane_messages
from app.stores.outbox import OutboxStore, Pending


class Admitted(NamedTuple):
    """What an admission decided so far: the jobs it held, the keys that may have room for a held job, and the
    concurrency keys of the jobs it held."""

    held: dict[str, Hold]
    room: set[KeyRef]
    keys: set[KeyRef]


class SqlFlow:
    def __init__(self, engine: AsyncEngine, names: Names, outbox: OutboxStore, lease_seconds: float) -> None:
        self.engine = engine
        self.names = names
        self.outbox = outbox
        self.lease = timedelta(seconds=lease_seconds)

    async def admit(self, job_ids: list[str]) -> Admission:
        """See FlowStore.admit."""
        async with self.engine.begin() as conn:
            return await self.admit_in(conn, job_ids)

    async def admit_in(self, conn: AsyncConnection, job_ids: list[str]) -> Admission:
        """See FlowStore.admit_in."""
        now = utcnow()
        since = now - self.lease
        rows = await conn.execute(select(*JOBS.c).where(C.id.in_(job_ids)).order_by(C.created_at, C.id))
        jobs = [job_row(row._mapping) for row in rows]
        todo = [j for j in jobs if j["held"] is None and ready(j, now) and not holds_grant(j, since)]
        todo = [j for j in todo if key_locks(j)]
        if not todo:
            return Admission()
        await lock_keys(conn, [lock for job in todo for lock in key_locks(job)])
        plain = [job for job in todo if job["rate_key"] is None]
        held, room = await self._admit_plain(conn, plain, now)
        keys = {KeyRef.of(j) for j in plain if j["id"] in held}
        rated = [job for job in todo if job["rate_key"] is not None]
        return await self._admit_rated(conn, rated, now, Admitted(held, room, keys), len(todo))

    async def _admit_rated(
        self, conn: AsyncConnection, jobs: list[JobRow], now: datetime, done: Admitted, limit: int
    ) -> Admission:
        """Admit jobs with a rate key one by one, oldest first (their keys locked), after the plain ones (`done`);
        then release up to `limit` jobs of each key that has room, in the same transaction. The whole admission."""
        held, room, keys = dict(done.held), set(done.room), set(done.keys)
        for job in jobs:
            hold = await self._decide(conn, job, now, ordered=True)
            if hold is None:
                await self._grant(conn, job, now)
            elif await self._hold(conn, job, hold, now):
                held[job["id"]] = hold
                ref = KeyRef.of(job)
                room.add(ref)
                if ref.key:
                    keys.add(ref)
        freed = await self._release_keys(conn, sorted(ref for ref in room if ref.key), now, limit)
        staged = await self.outbox.stage(conn, self._messages(freed))
        windows = [hold.until for hold in held.values() if hold.until is not None]
        return Admission(set(held), staged, min(windows, default=None), keys)

    async def _admit_plain(
        self, conn: AsyncConnection, jobs: list[JobRow], now: datetime
    ) -> tuple[dict[str, Hold], set[KeyRef]]:
        """Admit jobs with a concurrency key alone, set-wise (their keys locked): one read of every key's slots in
        use and jobs waiting, the grants in one UPDATE, the holds in another. Oldest first, each key's jobs take its
        free slots unless older ones wait. The jobs held, and the keys that may still have room for a held job
        (their waiting jobs older than these: the release takes them in order)."""
        if not jobs:
            return {}, set()
        refs = {KeyRef.of(job) for job in jobs}
        counts = await key_counts(conn, refs, now, now - self.lease)
        grants, holds = [], []
        for job in jobs:
            ref = KeyRef.of(job)
            taken, waiting = counts.get(ref, (0, 0))
            if taken < (job["concurrency_limit"] or 0) and waiting == 0:
                grants.append(job["id"])
                counts[ref] = (taken + 1, waiting)
            else:
                holds.append(job)
                counts[ref] = (taken, waiting + 1)
        await set_flow_many(conn, grants, {"granted_run": C.runs + 1, "granted_at": now})
        held = await set_flow_many(conn, [job["id"] for job in holds], {"held": str(CONCURRENCY), "held_until": None})
        await throttled(conn, [job for job in holds if job["id"] in held], CONCURRENCY, now)
        room = {ref for ref, (taken, waiting) in counts.items() if waiting and taken < limit_of(jobs, ref)}
        return {job["id"]: Hold(CONCURRENCY, job["concurrency_key"] or "") for job in holds if job["id"] in held}, room

    def _messages(self, freed: list[JobRow]) -> list[Outgoing]:
        """The lane messages of jobs just granted their slots: each says how long its grant holds, so its claim
        before then skips the admission."""
        return lane_messages(self.names, freed, grant_seconds=self.lease.total_seconds())

    async def look(self, keys: Sequence[KeyRef], limit: int) -> Looked | None:
        """See FlowStore.look: nothing, here."""
        return None

    async def release(
        self, keys: Sequence[KeyRef] | None, limit: int, looked: Looked | None = None
    ) -> tuple[int, list[Pending]]:
        """See FlowStore.release (what was looked at is read again here)."""
        now = utcnow()
        refs, window_due = await self._to_release(keys, limit, now)
        released, staged = await self._release_in_transaction(refs, now, limit)
        if window_due:
            more, also = await self._release_due(now, limit)
            released, staged = released + more, staged + also
        return released, staged

    async def _release_in_transaction(
        self, refs: Sequence[KeyRef], now: datetime, limit: int
    ) -> tuple[int, list[Pending]]:
        """Release the jobs held for these keys' slots in a transaction: the keys locked, the oldest held jobs that
        fit granted, their lane messages staged. How many, and the messages."""
        if not refs:
            return 0, []
        async with self.engine.begin() as conn:
            await self._lock_concurrency(conn, refs)
            freed = await self._release_keys(conn, refs, now, limit)
            return len(freed), await self.outbox.stage(conn, self._messages(freed))

    async def _release_due(self, now: datetime, limit: int) -> tuple[int, list[Pending]]:
        """Release the jobs held for rate windows that have passed, in a transaction."""
        async with self.engine.begin() as conn:
            freed = await self._release_windows(conn, now, limit)
            return len(freed), await self.outbox.stage(conn, self._messages(freed))

    async def _lock_concurrency(self, conn: AsyncConnection, refs: Sequence[KeyRef]) -> None:
        """Lock these concurrency keys' rows until the transaction ends (locks.lock_keys)."""
        await lock_keys(conn, [(str(CONCURRENCY), ref.client_id, ref.key) for ref in refs])

    async def _to_release(self, keys: Sequence[KeyRef] | None, limit: int, now: datetime) -> tuple[list[KeyRef], bool]:
        """Which of `keys` (None: of every key) have held jobs, and whether a held job's rate window has passed.
        Only keys with held jobs take their locks: a run's end seldom has a job of its key waiting, and an admission
        that holds one meanwhile asks for a release itself once it commits (workers/jobs/flow.py)."""
        async with self.engine.connect() as conn:  # most passes find nothing: reads, not a write transaction
            refs = [] if keys is not None and not keys else await held_keys(conn, limit, keys)
            windows = await conn.execute(select(C.id).where(C.held == str(RATE), C.held_until <= now).limit(1))
            return refs, windows.first() is not None

    async def next_window(self) -> datetime | None:
        """See FlowStore.next_window."""
        async with self.engine.connect() as conn:
            query = select(func.min(C.held_until)).where(C.held == str(RATE), C.finished_at.is_(None))
            upcoming: datetime | None = (await conn.execute(query)).scalar()
            return upcoming

    async def counts(self, client_id: str, key: str) -> KeyCounts:
        """See FlowStore.counts."""
        now = utcnow()
        mine = of_key(CONCURRENCY, client_id, key)
        running = select(func.count()).where(mine, occupying(now, now - self.lease))
        waiting = select(func.count()).where(mine, C.held == str(CONCURRENCY))
        async with self.engine.connect() as conn:
            return KeyCounts((await conn.execute(running)).scalar_one(), (await conn.execute(waiting)).scalar_one())

    async def _decide(self, conn: AsyncConnection, job: JobRow, now: datetime, ordered: bool) -> Hold | None:
        """None: the job may start now. Else why not. `ordered`: a job that has not waited yet goes behind the
        held jobs of its keys (a released one was the oldest of them)."""
        client, key, limit = job["client_id"], job["concurrency_key"], job["concurrency_limit"]
        if key is not None and limit is not None:
            mine = of_key(CONCURRENCY, client, key)
            taken = select(func.count()).where(mine, occupying(now, now - self.lease)).scalar_subquery()
            waiting = select(func.count()).where(mine, C.held == str(CONCURRENCY)).scalar_subquery()
            row = (await conn.execute(select(taken, waiting))).one()
            if row[0] >= limit or (ordered and row[1] > 0):
                return Hold(CONCURRENCY, key)
        rate_key = job["rate_key"]
        if rate_key is not None:
            until = await window_of(conn, job, now)
            if until is None and ordered and await others_wait(conn, RATE, client, rate_key):
                until = now  # the window has room, but older jobs of the key wait for it: after them
            if until is not None:
                return Hold(RATE, rate_key, until)
        return None

    async def _grant(self, conn: AsyncConnection, job: JobRow, now: datetime) -> JobRow | None:
        """Grant the job its next run (a slot, a start of its window) and clear its hold: the job as it is now, or
        None if it changed since it was read (its message is then judged by the claim as ever)."""
        values = {"held": None, "held_until": None, "granted_run": job["runs"] + 1, "granted_at": now}
        moved = await set_flow(conn, job, values)
        if moved is not None and job["rate_key"] is not None and job["rate_period"] is not None:
            client, key = job["client_id"], job["rate_key"]
            await conn.execute(insert(FLOW_STARTS).values(client_id=client, key=key, started_at=now))
            old = FLOW_STARTS.c.started_at <= now - timedelta(seconds=job["rate_period"])
            mine = and_(FLOW_STARTS.c.client_id == client, FLOW_STARTS.c.key == key)
            await conn.execute(delete(FLOW_STARTS).where(mine, old))
        return moved

    async def _hold(self, conn: AsyncConnection, job: JobRow, hold: Hold, now: datetime) -> bool:
        """Hold the job for `hold` (its audit row `throttled` the first time it is held back). False: it changed."""
        if await set_flow(conn, job, {"held": str(hold.reason), "held_until": hold.until}) is None:
            return False
        await throttled(conn, [job], hold.reason, now)
        return True

    async def _release_keys(
        self, conn: AsyncConnection, refs: Sequence[KeyRef], now: datetime, limit: int
    ) -> list[JobRow]:
        """The oldest jobs held for these keys' slots (the keys locked by the caller), granted while each key has
        free slots, set-wise: one grouped read of the slots in use, one read of each key's oldest held jobs, one
        UPDATE that grants them. A key whose next job also has a rate key goes job by job (`_release_key`)."""
        if not refs:
            return []
        counts = await key_counts(conn, set(refs), now, now - self.lease)
        order = func.row_number().over(partition_by=(C.client_id, C.concurrency_key), order_by=(C.created_at, C.id))
        held = and_(match_keys(refs), C.held == str(CONCURRENCY), C.finished_at.is_(None))
        columns = (C.id, C.client_id, C.concurrency_key, C.concurrency_limit, C.rate_key)
        ranked = select(*columns, order.label("place")).where(held).subquery()
        oldest = select(ranked).where(ranked.c.place <= limit).order_by(ranked.c.place)
        plain: list[str] = []
        slow: set[KeyRef] = set()
        for row in await conn.execute(oldest):
            ref = KeyRef(row.client_id, row.concurrency_key)
            taken, waiting = counts.get(ref, (0, 0))
            if ref in slow or taken >= (row.concurrency_limit or 0):
                continue
            if row.rate_key is not None:
                slow.add(ref)
                continue
            plain.append(row.id)
            counts[ref] = (taken + 1, waiting)
        guard = and_(C.id.in_(plain), C.held == str(CONCURRENCY), C.status.in_(LIVE))
        grant = {"held": None, "held_until": None, "granted_run": C.runs + 1, "granted_at": now}
        freed: list[JobRow] = []
        if plain:
            result = await conn.execute(update(JOBS).where(guard).values(grant).returning(*JOBS.c))
            freed = [job_row(row._mapping) for row in result]
        for ref in sorted(slow):
            freed += await self._release_key(conn, ref, now, limit)
        return freed

    async def _release_key(self, conn: AsyncConnection, ref: KeyRef, now: datetime, limit: int) -> list[JobRow]:
        """The oldest jobs held for this key's slots, granted while slots are free (the key locked by the caller);
        one whose rate window is full is held for that instead."""
        mine = and_(of_key(CONCURRENCY, ref.client_id, ref.key), C.held == str(CONCURRENCY))
        rows = await conn.execute(select(*JOBS.c).where(mine).order_by(C.created_at, C.id).limit(limit))
        return await self._release_in_order([job_row(row._mapping) for row in rows], conn, now)

    async def _release_windows(self, conn: AsyncConnection, now: datetime, limit: int) -> list[JobRow]:
        """The oldest jobs held for a rate window that may have room now, granted while their windows have it."""
        due = and_(C.held == str(RATE), C.held_until <= now, C.finished_at.is_(None))
        rows = await conn.execute(select(*JOBS.c).where(due).order_by(C.created_at, C.id).limit(limit))
        jobs = [job_row(row._mapping) for row in rows]
        await lock_keys(conn, [lock for job in jobs for lock in key_locks(job)])
        return await self._release_in_order(jobs, conn, now)

    async def _release_in_order(self, jobs: list[JobRow], conn: AsyncConnection, now: datetime) -> list[JobRow]:
        """Grant each job in turn; once a key makes one wait, the later jobs of that key wait too (they keep their
        order), held for what stops them."""
        freed: list[JobRow] = []
        stopped: set[Lock] = set()
        for job in jobs:
            keys = set(key_locks(job))
            if keys & stopped:
                continue
            # a job released for its slot waits on its window too: its rate key locked (the caller locked the rest)
            await lock_keys(conn, [lock for lock in keys if lock[0] == str(RATE)])
            hold = await self._decide(conn, job, now, ordered=False)
            if hold is None:
                granted = await self._grant(conn, job, now)
                freed += [granted] if granted is not None else []
                continue
            stopped |= keys
            if hold.reason != job["held"] or hold.until != job["held_until"]:
                await self._hold(conn, job, hold, now)
        return freed
