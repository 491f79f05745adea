"""The job worker's database side, set-based (rule 17): claim a batch by compare-and-set, renew every lease
held, record a batch of outcomes behind the per-row fencing check."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import Names
from app.core.statuses import DeadReason, JobStatus, sources_of
from app.models import pg_batch
from app.models.rows import JobRow, job_row
from app.models.setwise import per_row
from app.models.tables import JOBS
from app.models.types import utcnow
from app.services import outbox
from app.services.outbox import Pending, staged_event
from app.services.transitions import (
    NOW,
    Change,
    Move,
    Row,
    audit,
    cas_many,
    cas_pending,
    events_of,
    move,
    move_many,
    planned,
    record,
    stamp,
    trail_of,
)
from app.workers import unprocessable
from app.workers.retry_policy import budget

S = JobStatus
BURIABLE = [str(status) for status in sources_of(S.DEAD_LETTERED)]

# Rule 3's compare-and-set for the common case: a queued job whose budget (max_retries + 1 attempts) has room.
CLAIM_QUEUED = (
    update(JOBS)
    .where(JOBS.c.id.in_(bindparam("ids", expanding=True)), JOBS.c.status == S.QUEUED)
    .where(JOBS.c.attempts < JOBS.c.max_retries + 1)
    .values(
        status=str(S.RUNNING),
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


@dataclass(frozen=True)
class Claimed:
    """Ours to run: the job as claimed (its `runs` is our fencing token), and the events to publish."""

    job: JobRow
    events: list[Pending]


@dataclass(frozen=True)
class Drop:
    """Finished or gone: ack the message and forget it."""

    why: str


@dataclass(frozen=True)
class ToDeadLetters:
    """Dead-lettered already, or just now (events to publish, and the job as `buried`): reject the message into
    the DLQ."""

    events: list[Pending]
    buried: JobRow | None = None


@dataclass(frozen=True)
class Defer:
    """Leased by another worker, or not due yet: send the message back through a tier. `in_flight`: due, but
    leased by an attempt in flight (a webhook delivery's; an operator's message waits for that alone)."""

    seconds: float
    in_flight: bool = False


@dataclass(frozen=True)
class Raced:
    """Someone changed the job between our read and our compare-and-set: decide again."""


Verdict = Claimed | Drop | ToDeadLetters | Defer | Raced
Take = tuple[str, JobRow]  # the verdicts still to be written: "take" (run it) or "bury" (budget spent)


@dataclass(frozen=True)
class Outcome:
    """What one run ended in, to record if our fencing token still holds."""

    job: JobRow  # as claimed
    to: JobStatus  # SUCCEEDED, RETRYING or DEAD_LETTERED
    values: Row
    detail: Row


@dataclass(frozen=True)
class Early:
    """What `claim_queued` did: the jobs it claimed, and the events it staged for each job it moved."""

    claimed: dict[str, Claimed]
    events: dict[str, list[Pending]]


@dataclass(frozen=True)
class JobStore:
    engine: AsyncEngine
    names: Names
    lease_seconds: float

    async def claim_many(self, job_ids: list[str]) -> list[Verdict]:
        """Decide what each delivered message means for its job (rule 4); claim those that are ours to run."""
        early = await self.claim_queued(job_ids)
        rest = [job_id for job_id in job_ids if job_id not in early.claimed]
        judged = iter(await self.claim_rest(rest, early) if rest else [])
        return [early.claimed[job_id] if job_id in early.claimed else next(judged) for job_id in job_ids]

    async def claim_queued(self, job_ids: list[str]) -> "Early":
        """The common claim alone, in a transaction of its own: the pending among `job_ids` queued, the queued
        within their budget running, each step with its audit row and event. On PostgreSQL one statement."""
        early = Early({}, defaultdict(list))
        if not job_ids:
            return early
        now = utcnow()
        lease = now + timedelta(seconds=self.lease_seconds)
        ids = sorted(set(job_ids))
        if pg_batch.applies(self.engine):
            async with pg_batch.autocommit(self.engine) as conn:
                moved = await pg_batch.claim_recorded(conn, ids, now, lease, self.names.events_exchange)
            staged = [(job_row(one.row), staged_event(self.names.events_exchange, one.event)) for one in moved]
        else:
            async with self.engine.begin() as conn:
                queued = await cas_pending(conn, ids)
                rows = await conn.execute(CLAIM_QUEUED, {"ids": ids, "now": now, "lease": lease})
                claimed = [Move(S.QUEUED, job_row(row._mapping), {}) for row in rows]
                staged = await record(conn, self.names, [*queued, *claimed])
        for job, event in staged:
            early.events[job["id"]].append(event)
            if job["status"] == S.RUNNING:
                early.claimed[job["id"]] = Claimed(job, early.events[job["id"]])
        return early

    async def claim_rest(self, job_ids: list[str], early: "Early") -> list[Verdict]:
        """The jobs `claim_queued` did not claim, read and judged one by one (rule 4) in one transaction; a job it
        queued keeps its queued event before what follows."""
        async with self.engine.begin() as conn:
            judged = await self._claim_others(conn, job_ids, utcnow())
        return [_final(_after(early.events.get(j, []), judged.get(j, Drop("no such job")))) for j in job_ids]

    async def finish_many(self, outcomes: list[Outcome]) -> list[Pending | None]:
        """Record every outcome whose fencing token (`runs`) still holds; None for the rest."""
        if pg_batch.applies(self.engine):
            return await self._finish_at_once(outcomes)
        return await self._finish_portable(outcomes)

    async def _finish_at_once(self, outcomes: list[Outcome]) -> list[Pending | None]:
        """`finish_many` on PostgreSQL: the moves, their audit rows and their events planned here and written
        by one statement, a transaction by itself (rule 17's batch with no BEGIN or COMMIT round trip)."""
        now = utcnow()
        moves = [planned(Change(o.job, o.values, o.detail), o.to, now) for o in outcomes]
        rows = [{**m.after, "seq": o.job["seq"], "runs": o.job["runs"]} for o, m in zip(outcomes, moves, strict=True)]
        events = events_of(self.names, moves)
        async with pg_batch.autocommit(self.engine) as conn:
            moved, staged = await pg_batch.finish_recorded(
                conn, now, rows, trail_of(moves), outbox.rows_of(events, now)
            )
        return [
            Pending(staged[event.message_id or ""], event) if (o.job["id"], o.job["runs"]) in moved else None
            for o, event in zip(outcomes, events, strict=True)
        ]

    async def _finish_portable(self, outcomes: list[Outcome]) -> list[Pending | None]:
        """`finish_many` on SQLite and MSSQL: one UPDATE per outcome kind behind the fencing check, then the audit
        rows and events of what moved, one INSERT each, in one transaction."""
        async with self.engine.begin() as conn:
            moves: list[Move] = []
            for to in (S.SUCCEEDED, S.RETRYING, S.DEAD_LETTERED):
                mine = [o for o in outcomes if o.to == to]
                if mine:
                    tokens = {o.job["id"]: o.job["runs"] for o in mine}
                    fenced = JOBS.c.runs == per_row(JOBS.c.id, JOBS.c.runs, tokens)
                    changes = [Change(o.job, o.values, o.detail) for o in mine]
                    moves += await cas_many(conn, to, changes, where=(fenced,))
            staged = {(job["id"], job["seq"]): event for job, event in await record(conn, self.names, moves)}
        return [staged.get((o.job["id"], o.job["seq"] + 1)) for o in outcomes]

    async def _claim_others(self, conn: AsyncConnection, job_ids: list[str], now: datetime) -> dict[str, Any]:
        """Pending, retrying, leased, finished or spent jobs: read, judge each (rule 4), write what follows."""
        rows = await _read(conn, job_ids)
        verdicts: dict[str, Any] = {job_id: self._judge(job, now) for job_id, job in rows.items()}
        await self._write(conn, verdicts, now)
        return verdicts

    def _judge(self, job: JobRow, now: datetime) -> Verdict | Take:
        status = job["status"]
        if status in (S.SUCCEEDED, S.CANCELLED):
            return Drop(f"job is {status}")
        if status == S.DEAD_LETTERED:
            return ToDeadLetters([])
        if status == S.PENDING:
            return Raced()
        if status == S.SCHEDULED:  # not its time: the scheduler publishes its message when it is due
            return Drop("job is scheduled")
        lease, due = job["lease_until"], job["next_attempt_at"]
        if status == S.RUNNING and lease is not None and lease > now:
            return Defer((lease - now).total_seconds())
        if status == S.RETRYING and due is not None and due > now:
            return Defer((due - now).total_seconds())
        return ("bury" if job["attempts"] >= budget(job["max_retries"]) else "take", job)

    async def _write(self, conn: AsyncConnection, verdicts: dict[str, Any], now: datetime) -> None:
        """Write the claims and the burials with one compare-and-set each; losers of a race are Raced."""
        to_take = [v[1] for v in verdicts.values() if isinstance(v, tuple) and v[0] == "take"]
        to_bury = [v[1] for v in verdicts.values() if isinstance(v, tuple) and v[0] == "bury"]
        # Rule 3's compare-and-set: only a due retry or an expired lease may be taken over.
        due = (JOBS.c.status != S.RETRYING) | (JOBS.c.next_attempt_at <= now)
        expired = (JOBS.c.status != S.RUNNING) | (JOBS.c.lease_until < now)
        taken = await move_many(
            conn, self.names, S.RUNNING, [self._claim(j, now) for j in to_take], where=(due, expired)
        )
        buried = await move_many(conn, self.names, S.DEAD_LETTERED, [_burial(j, now) for j in to_bury])
        for job_id in [j["id"] for j in to_take + to_bury]:
            verdicts[job_id] = Raced()
        for job, staged in taken:
            verdicts[job["id"]] = Claimed(job, [staged])
        for job, staged in buried:
            verdicts[job["id"]] = ToDeadLetters([staged], job)

    def _claim(self, job: JobRow, now: datetime) -> Change:
        values = {
            "attempts": job["attempts"] + 1,
            "runs": job["runs"] + 1,
            "lease_until": now + timedelta(seconds=self.lease_seconds),
            "next_attempt_at": None,
            "started_at": job["started_at"] or now,
        }
        return Change(job, values)

    async def give_up(self, job_id: str, error: Row) -> tuple[JobRow, Pending] | None:
        """Dead-letter a job whose message the service failed to process (reason `unprocessable`), with its audit
        row and event; None when it has left the statuses that may be (finished, or gone). Should the job's own
        values break that too, its row and audit row are written alone, with no event."""
        reason = str(DeadReason.UNPROCESSABLE)
        values = {"error": error, "dead_reason": reason, "finished_at": utcnow(), "lease_until": None}
        try:
            async with self.engine.begin() as conn:
                job = (await _read(conn, [job_id])).get(job_id)
                if job is None or job["status"] not in BURIABLE:
                    return None
                detail = {"error": error, "reason": reason}
                return await move(conn, self.names, job, S.DEAD_LETTERED, values=values, detail=detail)
        except Exception as exc:
            if unprocessable.is_outage(exc):
                raise
        await self._bury_bare(job_id, values)
        return None

    async def _bury_bare(self, job_id: str, values: Row) -> None:
        """`give_up` by the job's status alone: read no column but status and attempts, build no event."""
        async with self.engine.begin() as conn:
            read = select(JOBS.c.status, JOBS.c.attempts).where(JOBS.c.id == job_id, JOBS.c.status.in_(BURIABLE))
            found = (await conn.execute(read)).first()
            if found is None:
                return
            now = values["finished_at"]
            moved = await conn.execute(
                update(JOBS)
                .where(JOBS.c.id == job_id, JOBS.c.status == found.status)
                .values(**values, status=str(S.DEAD_LETTERED), seq=JOBS.c.seq + 1, updated_at=now)
            )
            if moved.rowcount:
                detail = {"from": found.status, "to": str(S.DEAD_LETTERED), "attempt": found.attempts}
                detail |= {"error": values["error"], "reason": values["dead_reason"]}
                await audit(conn, job_id, str(S.DEAD_LETTERED), detail, now)

    async def renew_many(self, jobs: list[JobRow]) -> set[str]:
        """Extend the leases of these runs with one statement; return the ids still ours (not fenced out)."""
        if not jobs:
            return set()
        tokens = {job["id"]: job["runs"] for job in jobs}
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(JOBS)
                .where(JOBS.c.id.in_(list(tokens)), JOBS.c.status == S.RUNNING)
                .where(JOBS.c.runs == per_row(JOBS.c.id, JOBS.c.runs, tokens))
                .values(lease_until=utcnow() + timedelta(seconds=self.lease_seconds))
                .returning(JOBS.c.id)
            )
            return set(result.scalars())


async def _read(conn: AsyncConnection, job_ids: list[str]) -> dict[str, JobRow]:
    result = await conn.execute(select(JOBS).where(JOBS.c.id.in_(sorted(set(job_ids)))))
    return {row.id: job_row(row._mapping) for row in result}


def _after(earlier: list[Pending], verdict: Any) -> Any:
    """A verdict whose events follow `earlier` ones of the same job, staged in the same transaction."""
    if isinstance(verdict, Claimed):
        return Claimed(verdict.job, [*earlier, *verdict.events])
    if isinstance(verdict, ToDeadLetters):
        return ToDeadLetters([*earlier, *verdict.events], verdict.buried)
    return verdict


def _final(verdict: Verdict | Take) -> Verdict:
    return Raced() if isinstance(verdict, tuple) else verdict


def _burial(job: JobRow, now: datetime) -> Change:
    """A worker died on the last attempt: the crash used up the budget, so dead-letter without running."""
    error = {
        "type": "WorkerLost",
        "message": f"the worker running attempt {job['attempts']} stopped without a result",
    }
    values = {"error": error, "dead_reason": str(DeadReason.WORKER_LOST), "finished_at": now, "lease_until": None}
    return Change(job, values, {"error": error})


def succeeded(job: JobRow, result: Any) -> Outcome:
    values = {"result": result, "error": None, "finished_at": utcnow(), "lease_until": None}
    return Outcome(job, S.SUCCEEDED, values, {})


def retrying(job: JobRow, error: Row, next_attempt_at: datetime) -> Outcome:
    values = {"error": error, "next_attempt_at": next_attempt_at, "lease_until": None}
    return Outcome(job, S.RETRYING, values, {"error": error, "next_attempt_at": next_attempt_at.isoformat()})


def dead_lettered(job: JobRow, error: Row, reason: str) -> Outcome:
    values = {"error": error, "dead_reason": str(reason), "finished_at": utcnow(), "lease_until": None}
    return Outcome(job, S.DEAD_LETTERED, values, {"error": error, "reason": str(reason)})
