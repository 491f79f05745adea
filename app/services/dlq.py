"""The dead-letter queue as a resource: list what died and why, replay it, retry one, cancel one."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core import metrics
from app.core.failpoints import Failpoint, Failpoints
from app.core.names import Names
from app.core.secret_box import SecretBox
from app.core.statuses import JobStatus
from app.models.rows import JobRow, job_row
from app.models.tables import JOBS
from app.services import job_log
from app.services.outbox import Outbox
from app.services.payload_secrets import NO_KEY, kept, opened, sealed
from app.services.run_stops import RunStops
from app.services.tenancy import Principal, visible_to
from app.stores import steps
from app.stores.jobs import Edit, JobStore
from app.stores.outbox import Pending
from app.stores.pagination import newest_first

S = JobStatus
# Whatever the transition table lets a job be cancelled from at once (pending, queued, retrying; any status added
# there with a way to `cancelled`, such as `scheduled`, joins by itself); a running job is asked to stop instead.
CANCELLABLE = steps.CANCEL.sources
# A cancel whose compare-and-set loses to a change that leaves the job cancellable reads it again and retries;
# the last try locks the row before reading it, so on PostgreSQL (and on SQLite, whose write transactions are
# serial) no stream of such changes can keep a cancellable job from being cancelled.
CANCEL_TRIES = 3
# A new payload as a submit would check it, by job type: its JSON as it will be stored, or the 422 that refuses it.
Check = Callable[[str, Any], Awaitable[Any]]


class NotDeadLettered(Exception):
    """Only a dead-lettered job can be replayed."""

    def __init__(self, job_id: str, status: str | None = None) -> None:
        super().__init__(job_id)
        self.status = status  # the job's status as last read


class NotCancellable(Exception):
    """The job is finished: too late to cancel."""


class Cancel(NamedTuple):
    """What a cancel did: the job cancelled (`requested` False), or its run asked to stop (True)."""

    job: JobRow
    requested: bool


class _Lost(Exception):
    """A compare-and-set found the row changed: roll the transaction back."""


NUL = "\x00"


@dataclass(frozen=True)
class DlqService:
    engine: AsyncEngine
    jobs: JobStore
    outbox: Outbox
    names: Names
    stops: RunStops
    failpoints: Failpoints = field(default_factory=Failpoints)
    box: SecretBox = NO_KEY  # opens and seals the credentials of an edited payload

    async def page(
        self, principal: Principal, job_type: str | None, limit: int, cursor: str | None, group: str | None = None
    ) -> tuple[list[JobRow], str | None]:
        """Dead-lettered jobs (of one failure group, with `group`), newest first, and the cursor to the next page
        when more may follow."""
        query = select(JOBS).where(visible_to(JOBS, principal), JOBS.c.status == S.DEAD_LETTERED)
        if job_type:
            query = query.where(JOBS.c.job_type == job_type)
        if group is not None:
            query = query.where(JOBS.c.failure_group == group)
        rows, after = await newest_first(self.engine, JOBS, query, limit, cursor, "dlq")
        return [job_row(row) for row in rows], after

    async def stats(self, principal: Principal) -> dict[str, Any]:
        """Counts of the caller's dead-lettered jobs, by type and by reason."""
        dead = select(JOBS.c.job_type, JOBS.c.dead_reason, func.count().label("n")).where(
            visible_to(JOBS, principal), JOBS.c.status == S.DEAD_LETTERED
        )
        async with self.engine.connect() as conn:
            rows = (await conn.execute(dead.group_by(JOBS.c.job_type, JOBS.c.dead_reason))).all()
        by_type: dict[str, int] = {}
        by_reason: dict[str, int] = {}
        for job_type, reason, n in rows:
            by_type[job_type] = by_type.get(job_type, 0) + n
            by_reason[reason or "unknown"] = by_reason.get(reason or "unknown", 0) + n
        return {"dead_lettered": sum(by_type.values()), "by_job_type": by_type, "by_reason": by_reason}

    async def replay(
        self,
        principal: Principal,
        job_ids: list[str] | None,
        job_type: str | None,
        limit: int,
        group: str | None = None,
    ) -> list[str]:
        """Send dead jobs (of one failure group, with `group`) back to work, oldest first, each in its own
        transaction: a crash half-way loses nothing (the outbox holds what was committed) and a second run
        replays nothing twice."""
        # No job's id or type holds a NUL, which PostgreSQL cannot even compare: such a name matches nothing.
        if NUL in (job_type or "") or NUL in (group or ""):
            return []
        query = select(JOBS).where(visible_to(JOBS, principal), JOBS.c.status == S.DEAD_LETTERED)
        if job_ids is not None:
            query = query.where(JOBS.c.id.in_([job_id for job_id in job_ids if NUL not in job_id]))
        if job_type:
            query = query.where(JOBS.c.job_type == job_type)
        if group is not None:
            query = query.where(JOBS.c.failure_group == group)
        query = query.order_by(JOBS.c.created_at, JOBS.c.id).limit(limit)
        async with self.engine.connect() as conn:
            candidates = [job_row(r._mapping) for r in await conn.execute(query)]
        replayed = []
        for job in candidates:
            done = await self._replay_one(job)
            if done is not None:
                self.failpoints.hit(Failpoint.AFTER_REPLAY_COMMIT)
                await self.outbox.publish(done[1])
                replayed.append(job["id"])
        return replayed

    async def retry(self, principal: Principal, job_id: str) -> JobRow | None:
        """Replay one job, answering it as replayed (a worker may take it a moment later); None when the caller
        has no such job, NotDeadLettered when it is not dead."""
        job = await self._visible(principal, job_id)
        if job is None:
            return None
        return await self._replay_read(principal, job)

    async def edit(self, principal: Principal, job_id: str, payload: Any, check: Check) -> JobRow | None:
        """Replay one job with a new payload, checked by `check` as a submit checks one (its values left as they
        were shown keep the credentials they hid), its credentials sealed; the change and the replay in one
        transaction with an `edited` audit row. None and NotDeadLettered as `retry`."""
        job = await self._visible(principal, job_id)
        if job is None:
            return None
        if job["status"] != S.DEAD_LETTERED:
            raise NotDeadLettered(job_id, job["status"])
        whole = kept(payload, job["payload"], opened(job["payload"], job["sealed"], self.box))
        shown, sealed_credentials = sealed(job["job_type"], await check(job["job_type"], whole), self.box)
        detail = {"by": principal.client_id, "admin": principal.admin, "before": job["payload"], "after": shown}
        return await self._replay_read(principal, job, Edit(shown, sealed_credentials, detail))

    async def _replay_read(self, principal: Principal, job: JobRow, edit: Edit | None = None) -> JobRow | None:
        """Replay a job as read: the job queued, None when it is gone since, NotDeadLettered when it is not dead."""
        replayed = await self._replay_one(job, edit) if job["status"] == S.DEAD_LETTERED else None
        if replayed is None:
            if job["status"] == S.DEAD_LETTERED and await self._visible(principal, job["id"]) is None:
                return None  # retention deleted it since it was read
            raise NotDeadLettered(job["id"], job["status"])
        queued, staged = replayed
        await self.outbox.publish(staged)
        return queued

    async def _replay_one(self, job: JobRow, edit: Edit | None = None) -> tuple[JobRow, list[Pending]] | None:
        """dead_lettered -> queued by compare-and-set, attempts reset (never runs), with its message (and its
        edit), in one tx."""
        try:
            async with self.jobs.transaction() as conn:
                replayed = await self.jobs.replay(conn, job, edit=edit)
                if replayed is None:
                    raise _Lost
        except _Lost:
            return None  # someone else replayed or changed it first; the transaction rolled back
        except IntegrityError:
            return None  # retention deleted it first: its audit row has no job to belong to
        return replayed

    async def cancel(self, principal: Principal, job_id: str) -> Cancel | None:
        """A job that has not started -> cancelled by compare-and-set; a claim racing with it wins or loses whole.
        A running job's run is asked to stop (its worker records it cancelled, unless it finishes first).

        A lost compare-and-set is not an answer: the job may have changed and still be cancellable (the submit's
        pending -> queued confirmation commits in the background just after the submit answers), so read it
        again and retry. NotCancellable means the job, as last read, has finished (or, on a database where the
        last try's row lock is a no-op, that it kept changing through every try).
        """
        for attempt in range(1, CANCEL_TRIES + 1):
            async with self.engine.begin() as conn:
                job = await self._read(conn, principal, job_id, lock=attempt == CANCEL_TRIES)
                if job is None:
                    return None
                if job["status"] not in (*CANCELLABLE, S.RUNNING):
                    raise NotCancellable(job["status"])
                asked, moved = [], None
                if job["status"] == S.RUNNING:
                    asked = await self.jobs.request_cancel(conn, [job])
                else:
                    moved = await self.jobs.cancel(conn, job)
            if asked:
                await self.stops.tell([job_id])
                return Cancel(asked[0], requested=True)
            if moved is not None:
                return await self._cancelled(job, *moved)
        raise NotCancellable("still changing")

    async def _cancelled(self, job: JobRow, cancelled: JobRow, staged: list[Pending]) -> Cancel:
        metrics.count_outcomes([(job["job_type"], S.CANCELLED)])
        job_log.finished(cancelled, S.CANCELLED, cancelled["finished_at"])
        await self.outbox.publish(staged)
        return Cancel(cancelled, requested=False)

    async def _visible(self, principal: Principal, job_id: str) -> JobRow | None:
        async with self.engine.connect() as conn:
            return await self._read(conn, principal, job_id)

    @staticmethod
    async def _read(conn: AsyncConnection, principal: Principal, job_id: str, lock: bool = False) -> JobRow | None:
        """The caller's job as it stands; with `lock`, row-locked until `conn`'s transaction ends (FOR UPDATE:
        PostgreSQL; SQLAlchemy renders nothing for SQLite, whose write transactions hold the database anyway,
        nor for MSSQL)."""
        query = select(JOBS).where(JOBS.c.id == job_id, visible_to(JOBS, principal))
        row = (await conn.execute(query.with_for_update() if lock else query)).first()
        return job_row(row._mapping) if row else None
