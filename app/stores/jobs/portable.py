"""The jobs store on any database SQLAlchemy speaks: SQLite, MSSQL (by rendering, DESIGN rule 14) and
PostgreSQL; `postgres.PgJobs` replaces its hot statements there."""

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, Update, and_, bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.failure_groups import group_of
from app.core.messages import JobMessage, job_outgoing
from app.core.names import Names
from app.core.statuses import HeldReason, JobStatus, TrailEvent
from app.models.claims import skip_locked
from app.models.rows import JobRow, TrailRow, job_row
from app.models.setwise import per_row
from app.models.tables import JOB_EVENTS, JOBS
from app.models.types import utcnow
from app.stores import steps
from app.stores.flow import Admission
from app.stores.jobs import Admit, Claim, Edit, Finished, Moved, NewJobs, Outcome, Renewed, holds
from app.stores.jobs.moves import Change, Move, compare_and_set, events_of, planned, stamp, trail_of
from app.stores.jobs.progress import progress_update
from app.stores.outbox import Pending
from app.stores.outbox.portable import PortableOutbox
from app.stores.steps import Step
from app.stores.workflows import follow
from app.stores.workflows.counts import Counts

S = JobStatus
INSERT_JOBS = insert(JOBS)
INSERT_EVENT = insert(JOB_EVENTS)  # built once: SQLAlchemy reuses its compiled form
NOW = bindparam("now", type_=JOBS.c.updated_at.type)
# pending -> queued: `pending` has one way in and leaves only by a step guarded like this one, so the status is
# the whole compare-and-set; no row needs reading first.
QUEUE_PENDING = (
    update(JOBS)
    .where(JOBS.c.id.in_(bindparam("ids", expanding=True)), steps.QUEUE.guard())
    .values(status=str(steps.QUEUE.target), seq=JOBS.c.seq + 1, updated_at=stamp(NOW))
    .returning(*JOBS.c)
)
# Rule 3's compare-and-set for the common case: a queued job whose budget (max_retries + 1 attempts) has room, and
# that is not held (rule 18: its release sends its message again).
CLAIM_QUEUED = (
    update(JOBS)
    .where(JOBS.c.id.in_(bindparam("ids", expanding=True)), steps.CLAIM.guard(), JOBS.c.held.is_(None))
    .where(JOBS.c.attempts < JOBS.c.max_retries + 1)
    .values(
        status=str(steps.CLAIM.target),
        attempts=JOBS.c.attempts + 1,
        runs=JOBS.c.runs + 1,
        seq=JOBS.c.seq + 1,
        lease_until=bindparam("lease"),
        next_attempt_at=None,
        started_at=func.coalesce(JOBS.c.started_at, NOW),
        updated_at=stamp(NOW),
    )
    .returning(*JOBS.c)
)


# A run that failed after its job's cancel was asked for is not retried: its retry is refused like a fenced-out
# outcome, and its worker records it cancelled instead (PostgreSQL's FINISH_RECORDED says the same).
FINISH_WHERE: dict[JobStatus, tuple[ColumnElement[bool], ...]] = {S.RETRYING: (JOBS.c.cancel_requested_at.is_(None),)}


class PortableJobs:
    def __init__(self, engine: AsyncEngine, names: Names, outbox: PortableOutbox, lease_seconds: float) -> None:
        self.engine = engine
        self.names = names
        self.outbox = outbox
        self.lease_seconds = lease_seconds
        self.counts = Counts()  # what follows a workflow's outcome moves these (stores/workflows/follow.py)

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection in a transaction of its own, committed as the block ends."""
        return self.engine.begin()

    def one_transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for work that is one statement on PostgreSQL; here a transaction of several."""
        return self.engine.begin()

    async def read(self, conn: AsyncConnection, job_ids: list[str]) -> dict[str, JobRow]:
        """The jobs among `job_ids` as they stand, by id."""
        result = await conn.execute(select(JOBS).where(JOBS.c.id.in_(sorted(set(job_ids)))))
        return {row.id: job_row(row._mapping) for row in result}

    async def save(self, conn: AsyncConnection, new: NewJobs) -> list[Pending]:
        """New jobs, their first audit rows and their messages staged, one statement each."""
        await conn.execute(INSERT_JOBS, list(new.jobs))
        await self.audit(conn, new.trail)
        return await self.outbox.stage(conn, new.messages, new.owners)

    async def audit(self, conn: AsyncConnection, rows: list[TrailRow]) -> None:
        """Audit rows (job_id, event, detail, created_at), one statement."""
        await conn.execute(INSERT_EVENT, rows)

    async def record(self, conn: AsyncConnection, moves: list[Move]) -> list[Moved]:
        """The audit rows and staged events of moves already made, whatever the moves were."""
        if not moves:
            return []
        await self.audit(conn, trail_of(moves))
        staged = await self.outbox.stage(conn, events_of(self.names, moves))
        return list(zip([m.after for m in moves], staged, strict=True))

    async def settle(self, conn: AsyncConnection, moves: list[Move]) -> list[Pending]:
        """What follows `moves` in their workflows, written in `conn`'s transaction (stores/workflows/follow.py):
        the messages and events to publish once it commits."""
        return await follow.follow(self, conn, moves) if follow.concerns(moves) else []

    async def cas(
        self, conn: AsyncConnection, step: Step, changes: list[Change], where: tuple[ColumnElement[bool], ...] = ()
    ) -> list[Move]:
        """One step's compare-and-set for every job of `changes` (each as last read, by its seq): the moves made."""
        if not changes:
            return []
        now = utcnow()
        by_id = {c.job["id"]: c for c in changes}
        result = await conn.execute(compare_and_set(step, changes, now, where))
        return [planned(by_id[job_id], step.target, now) for job_id in result.scalars()]

    async def move(
        self, conn: AsyncConnection, step: Step, changes: list[Change], where: tuple[ColumnElement[bool], ...] = ()
    ) -> list[Moved]:
        """`cas` with what records it: the jobs moved, each with its staged event."""
        return await self.record(conn, await self.cas(conn, step, changes, where))

    async def queue_published(self, conn: AsyncConnection, job_ids: list[str], confirmed: list[int]) -> list[Pending]:
        """pending -> queued for jobs whose messages the broker confirmed (a worker whose message arrived first
        makes the same step: whichever commits first moves the job), their outbox rows deleted."""
        staged = [pending for _, pending in await self.record(conn, await self._queue_pending(conn, job_ids))]
        await self.outbox.drop(conn, confirmed)
        return staged

    async def _queue_pending(self, conn: AsyncConnection, job_ids: list[str]) -> list[Move]:
        if not job_ids:
            return []
        rows = await conn.execute(QUEUE_PENDING, {"ids": sorted(set(job_ids)), "now": utcnow()})
        return [Move(S.PENDING, job_row(row._mapping), {}) for row in rows]

    async def claim(self, job_ids: list[str], admit: Admit | None = None) -> Claim:
        """Rule 3's claim for a batch in a transaction of its own: the pending queued, the queued within their
        budget running, each step with its audit row and its event, in the order of the steps; with `admit`, after
        it (the jobs it held back left out)."""
        async with self.engine.begin() as conn:
            admission = await admit.admit_in(conn, admit.keyed) if admit is not None else Admission()
            now = utcnow()
            lease = now + timedelta(seconds=self.lease_seconds)
            ids = sorted(set(job_ids) - admission.held)
            queued = await self._queue_pending(conn, ids)
            rows = await conn.execute(CLAIM_QUEUED, {"ids": ids, "now": now, "lease": lease})
            claimed = [Move(S.QUEUED, job_row(row._mapping), {}) for row in rows]
            return Claim(await self.record(conn, [*queued, *claimed]), admission)

    async def take_over(
        self, conn: AsyncConnection, changes: list[Change], where: tuple[ColumnElement[bool], ...]
    ) -> list[Moved]:
        """Jobs judged ours to run (a due retry, an expired lease) -> running."""
        return await self.move(conn, steps.TAKE_OVER, changes, where)

    async def bury(self, conn: AsyncConnection, changes: list[Change]) -> list[Moved]:
        """Jobs whose budget crashes used up -> dead_lettered (what follows in their workflows is staged for the
        relay to publish)."""
        moves = await self.cas(conn, steps.BURY, changes)
        await self.settle(conn, moves)
        return await self.record(conn, moves)

    async def stop(
        self, conn: AsyncConnection, changes: list[Change], where: tuple[ColumnElement[bool], ...]
    ) -> list[Moved]:
        """Running jobs whose cancel was asked for and whose run was lost (its lease expired) -> cancelled; what
        follows in their workflows is staged for the relay to publish, as a burial's."""
        moves = await self.cas(conn, steps.STOP, changes, where)
        await self.settle(conn, moves)
        return await self.record(conn, moves)

    async def finish(self, outcomes: list[Outcome]) -> Finished:
        """One UPDATE per outcome kind behind the fencing check (`runs`), then the audit rows and events of what
        moved, one INSERT each, and what follows in workflows, in one transaction; None for an outcome fenced
        out."""
        async with self.engine.begin() as conn:
            moves: list[Move] = []
            for to, step in steps.FINISHES.items():
                mine = [o for o in outcomes if o.to == to]
                if mine:
                    tokens = {o.job["id"]: o.job["runs"] for o in mine}
                    fenced = JOBS.c.runs == per_row(JOBS.c.id, JOBS.c.runs, tokens)
                    changes = [Change(o.job, o.values, o.detail) for o in mine]
                    moves += await self.cas(conn, step, changes, where=(fenced, *FINISH_WHERE.get(to, ())))
            staged = {(job["id"], job["seq"]): event for job, event in await self.record(conn, moves)}
            followed = await self.settle(conn, moves)
        return Finished([staged.get((o.job["id"], o.job["seq"] + 1)) for o in outcomes], followed)

    async def renew(self, jobs: list[JobRow]) -> Renewed:
        """Extend the leases of these runs with one statement: the ids still ours (not fenced out), and those of
        them whose cancel was asked for."""
        if not jobs:
            return Renewed(set(), set())
        tokens = {job["id"]: job["runs"] for job in jobs}
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(JOBS)
                .where(JOBS.c.id.in_(list(tokens)), JOBS.c.status == S.RUNNING)
                .where(JOBS.c.runs == per_row(JOBS.c.id, JOBS.c.runs, tokens))
                .values(lease_until=utcnow() + timedelta(seconds=self.lease_seconds))
                .returning(JOBS.c.id, JOBS.c.cancel_requested_at)
            )
            rows = result.all()
        return Renewed({row.id for row in rows}, {row.id for row in rows if row.cancel_requested_at is not None})

    async def request_cancel(self, conn: AsyncConnection, jobs: list[JobRow]) -> list[JobRow]:
        """Ask the runs of running jobs (each as last read: its `runs`) to stop, one statement: each one's
        `cancel_requested_at` set, kept if set before. Not a status change (the seq stays, so a run's own outcome
        is not fenced out by it): those still in that run, as they are now."""
        if not jobs:
            return []
        result = await conn.execute(cancel_request({job["id"]: job["runs"] for job in jobs}, utcnow()))
        return [job_row(row._mapping) for row in result]

    async def progress(self, reports: Mapping[str, tuple[int, dict[str, Any]]]) -> set[str]:
        """Running jobs' progress written with one statement, each behind its run's token: the ids written."""
        if not reports:
            return set()
        async with self.one_transaction() as conn:
            return set((await conn.execute(progress_update(reports))).scalars())

    async def queue_due(self, now: datetime, limit: int) -> tuple[list[JobRow], list[Pending]]:
        """Up to `limit` due scheduled jobs queued, oldest time first, with their audit rows, events and lane
        messages, in one transaction: the jobs, and the messages and events to publish."""
        async with self.engine.connect() as conn:  # most cycles find nothing due: a read, not a write transaction
            if (await conn.execute(select(JOBS.c.id).where(_due(now)).limit(1))).first() is None:
                return [], []
        async with self.engine.begin() as conn:
            jobs = [job_row(row._mapping) for row in await conn.execute(_claim_due(now, limit))]
            if not jobs:
                return [], []
            events = [staged for _, staged in await self.record(conn, [Move(S.SCHEDULED, job, {}) for job in jobs])]
            messages = await self.outbox.stage(conn, [job_outgoing(self.names, JobMessage.from_row(j)) for j in jobs])
        return jobs, [*messages, *events]

    async def replay(
        self,
        conn: AsyncConnection,
        job: JobRow,
        detail: Mapping[str, Any] | None = None,
        edit: Edit | None = None,
    ) -> tuple[JobRow, list[Pending]] | None:
        """dead_lettered -> queued by compare-and-set, its budget reset (it never runs), with its message; `detail`
        joins its `replayed` audit row's (a redrive's id); with `edit`, its new payload in the same compare-and-set,
        and its `edited` row before its `replayed` one."""
        queued, staged = await self.replay_all(conn, [job], detail, edit)
        return (queued[0], staged) if queued else None

    async def replay_all(
        self,
        conn: AsyncConnection,
        jobs: list[JobRow],
        detail: Mapping[str, Any] | None = None,
        edit: Edit | None = None,
    ) -> tuple[list[JobRow], list[Pending]]:
        """`replay` for many jobs, a statement for each step: those moved, with their messages and events. The
        audit rows are written for all: the caller rolls its transaction back when some did not move. An `edit` is
        of one job."""
        trail = [_trail_row(job["id"], TrailEvent.REPLAYED, _replayed(job, detail)) for job in jobs]
        values: dict[str, Any] = {"attempts": 0, "dead_reason": None, "finished_at": None, "next_attempt_at": None}
        if edit is not None:
            (edited,) = jobs
            trail.insert(0, _trail_row(edited["id"], TrailEvent.EDITED, edit.detail))
            values.update(payload=edit.payload, sealed=edit.sealed)
        await self.audit(conn, trail)
        moves = await self.cas(conn, steps.REPLAY, [Change(job, values) for job in jobs])
        moved = await self.record(conn, moves)
        outgoing = [job_outgoing(self.names, JobMessage.from_row(queued)) for queued, _ in moved]
        messages = await self.outbox.stage(conn, outgoing) if outgoing else []
        events = [event for _, event in moved]
        return [queued for queued, _ in moved], [*messages, *events, *await self.settle(conn, moves)]

    async def cancel(self, conn: AsyncConnection, job: JobRow) -> tuple[JobRow, list[Pending]] | None:
        """A job that has not started (as last read) -> cancelled; held or not, it is never released: the job,
        its event and what followed in its workflow."""
        cancelled, staged = await self.cancel_all(conn, [job])
        return (cancelled[0], staged) if cancelled else None

    async def cancel_all(self, conn: AsyncConnection, jobs: list[JobRow]) -> tuple[list[JobRow], list[Pending]]:
        """`cancel` for many jobs at once: those cancelled, and their events with what followed."""
        values = {"finished_at": utcnow(), "lease_until": None, "held": None}
        moves = await self.cas(conn, steps.CANCEL, [Change(job, values) for job in jobs])
        moved = await self.record(conn, moves)
        return [job for job, _ in moved], [event for _, event in moved] + await self.settle(conn, moves)

    async def dependency_results(self, job_ids: list[str]) -> dict[str, Any]:
        """The results of these jobs (a job's dependencies), by their refs, in one read."""
        query = select(JOBS.c.ref, JOBS.c.result).where(JOBS.c.id.in_(sorted(set(job_ids))))
        async with self.engine.connect() as conn:
            return {row.ref: row.result for row in await conn.execute(query)}

    async def hold(self, job_ids: list[str], reason: HeldReason) -> set[str]:
        """The jobs among `job_ids` that wait to start held back in the database (rule 18) while `reason` stands,
        each newly held with its `held` audit row, in one transaction: the ids held now, by this call or before."""
        async with self.engine.begin() as conn:
            held, trail = await holds.hold(conn, job_ids, reason)
            if trail:
                await self.audit(conn, trail)
        return held

    async def release(
        self, job_types: list[str], limit: int, reason: HeldReason = HeldReason.PAUSED
    ) -> tuple[list[JobRow], list[Pending]]:
        """Up to `limit` jobs of `job_types` held for `reason` that has passed, released oldest first with their
        lane messages staged, in one transaction: the jobs, and the messages to publish."""
        async with self.engine.connect() as conn:  # most cycles find nothing to release: a read, not a write
            if not await holds.any_released(conn, job_types, reason):
                return [], []
        async with self.engine.begin() as conn:
            jobs = await holds.take_released(conn, job_types, limit, reason)
            return jobs, await self.outbox.stage(conn, holds.lane_messages(self.names, jobs))

    async def give_up(self, job_id: str, values: dict[str, Any], detail: dict[str, Any]) -> Moved | None:
        """A job whose message the service failed to process -> dead_lettered, with its audit row and event; None
        when it has left the statuses that may be (finished, or gone)."""
        async with self.engine.begin() as conn:
            job = (await self.read(conn, [job_id])).get(job_id)
            if job is None or job["status"] not in steps.BURY.sources:
                return None
            grouped = {**values, "failure_group": group_of(job["job_type"], values["error"])}
            moves = await self.cas(conn, steps.BURY, [Change(job, grouped, detail)])
            await self.settle(conn, moves)  # staged for the relay: this path is rare, and not a hot one
            moved = await self.record(conn, moves)
            return moved[0] if moved else None

    async def give_up_bare(self, job_id: str, values: dict[str, Any]) -> None:
        """`give_up` for a job whose own values break it: by its status alone, reading no column but status and
        attempts, building no event; its row and audit row are written alone."""
        async with self.engine.begin() as conn:
            read = select(JOBS.c.status, JOBS.c.attempts, JOBS.c.workflow_id, JOBS.c.job_type).where(
                JOBS.c.id == job_id, steps.BURY.guard()
            )
            found = (await conn.execute(read)).first()
            if found is None:
                return
            now = values["finished_at"]
            moved = await conn.execute(
                update(JOBS)
                .where(JOBS.c.id == job_id, steps.BURY.guard(), JOBS.c.status == found.status)
                .values(**values, status=str(steps.BURY.target), seq=JOBS.c.seq + 1, updated_at=now)
                .values(failure_group=group_of(found.job_type, values["error"]))
            )
            if moved.rowcount:
                detail = {"from": found.status, "to": str(S.DEAD_LETTERED), "attempt": found.attempts}
                detail |= {"error": values["error"], "reason": values["dead_reason"]}
                await self.audit(
                    conn, [{"job_id": job_id, "event": str(S.DEAD_LETTERED), "detail": detail, "created_at": now}]
                )
                if found.workflow_id is not None:  # its dependents and its workflow still follow it
                    after = {"id": job_id, "workflow_id": found.workflow_id, "status": str(S.DEAD_LETTERED)}
                    await self.settle(conn, [Move(found.status, cast(JobRow, after), {})])


def cancel_request(tokens: dict[str, int], now: datetime) -> Update:
    """The jobs by id still running in the run of their token (`runs`), their cancel asked for at `now` unless it
    was before; RETURNING them."""
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(sorted(tokens)), JOBS.c.status == S.RUNNING)
        .where(JOBS.c.runs == per_row(JOBS.c.id, JOBS.c.runs, tokens))
        .values(cancel_requested_at=func.coalesce(JOBS.c.cancel_requested_at, now))
        .returning(*JOBS.c)
    )


def _replayed(job: JobRow, detail: Mapping[str, Any] | None) -> dict[str, Any]:
    """A `replayed` audit row's detail: the move, the budget it leaves behind, and what the caller adds."""
    return {
        "from": job["status"],
        "to": str(S.QUEUED),
        "attempt": job["attempts"],
        "runs": job["runs"],
        **(detail or {}),
    }


def _trail_row(job_id: str, event: str, detail: dict[str, Any]) -> TrailRow:
    return {"job_id": job_id, "event": event, "detail": detail, "created_at": utcnow()}


def _due(now: datetime) -> ColumnElement[bool]:
    return and_(steps.QUEUE_DUE.guard(), JOBS.c.next_attempt_at <= now)


def _claim_due(now: datetime, limit: int) -> Update:
    """The due scheduled jobs, oldest time first, moved to queued in one UPDATE that returns them. The inner
    SELECT passes over rows another scheduler holds (`skip_locked`); the outer guard makes it a compare-and-set
    on every dialect."""
    due = select(JOBS.c.id).where(_due(now)).order_by(JOBS.c.next_attempt_at).limit(limit)
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(skip_locked(due, JOBS)), steps.QUEUE_DUE.guard())
        .values(status=str(steps.QUEUE_DUE.target), seq=JOBS.c.seq + 1, updated_at=stamp(now), next_attempt_at=None)
        .returning(*JOBS.c)
    )
