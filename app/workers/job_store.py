"""The job worker's database side: claim by compare-and-set, renew the lease, record the outcome."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import Names
from app.core.statuses import JobStatus
from app.models.tables import JOBS
from app.models.types import utcnow
from app.services.outbox import Pending
from app.services.transitions import Row, move
from app.workers.retry_policy import DeadLetter, DeadReason, Retry, budget

S = JobStatus
CLAIM_TRIES = 3


@dataclass(frozen=True)
class Claimed:
    """Ours to run: the job as claimed (its `runs` is our fencing token), and the events to publish."""

    job: Row
    events: list[Pending]


@dataclass(frozen=True)
class Drop:
    """Finished or gone: ack the message and forget it."""

    why: str


@dataclass(frozen=True)
class ToDeadLetters:
    """Dead-lettered already, or just now (events to publish): reject the message into the DLQ."""

    events: list[Pending]


@dataclass(frozen=True)
class Defer:
    """Leased by another worker, or not due yet: send the message back through a tier."""

    seconds: float


Verdict = Claimed | Drop | ToDeadLetters | Defer


@dataclass(frozen=True)
class JobStore:
    engine: AsyncEngine
    names: Names
    lease_seconds: float

    async def claim(self, job_id: str) -> Verdict:
        """Decide what a delivered message means for its job (rule 4) and claim it if it is ours to run."""
        for _ in range(CLAIM_TRIES):
            async with self.engine.begin() as conn:
                row = (await conn.execute(select(JOBS).where(JOBS.c.id == job_id))).first()
                if row is None:
                    return Drop("no such job")
                verdict = await self._decide(conn, dict(row._mapping), utcnow())
            if verdict is not None:
                return verdict
        return Defer(self.lease_seconds)

    async def _decide(self, conn: AsyncConnection, job: Row, now: datetime) -> Verdict | None:
        status = job["status"]
        if status in (S.SUCCEEDED, S.CANCELLED):
            return Drop(f"job is {status}")
        if status == S.DEAD_LETTERED:
            return ToDeadLetters([])
        if status == S.RUNNING and job["lease_until"] > now:
            return Defer((job["lease_until"] - now).total_seconds())
        if status == S.RETRYING and job["next_attempt_at"] and job["next_attempt_at"] > now:
            return Defer((job["next_attempt_at"] - now).total_seconds())
        events: list[Pending] = []
        if status == S.PENDING:  # the message beat the API's own pending -> queued
            moved = await move(conn, self.names, job, S.QUEUED)
            if moved is None:
                return None
            job, event = moved
            events.append(event)
        if job["attempts"] >= budget(job["max_retries"]):
            return await self._budget_spent(conn, job, events, now)
        return await self._take(conn, job, events, now)

    async def _take(self, conn: AsyncConnection, job: Row, events: list[Pending], now: datetime) -> Verdict | None:
        values = {
            "attempts": job["attempts"] + 1,
            "runs": job["runs"] + 1,
            "lease_until": now + timedelta(seconds=self.lease_seconds),
            "next_attempt_at": None,
            "started_at": job["started_at"] or now,
        }
        # Rule 3's compare-and-set: only a due retry or an expired lease may be taken over.
        due = (JOBS.c.status != S.RETRYING) | (JOBS.c.next_attempt_at <= now)
        expired = (JOBS.c.status != S.RUNNING) | (JOBS.c.lease_until < now)
        moved = await move(conn, self.names, job, S.RUNNING, where=(due, expired), values=values)
        if moved is None:
            return None
        return Claimed(moved[0], [*events, moved[1]])

    async def _budget_spent(
        self, conn: AsyncConnection, job: Row, events: list[Pending], now: datetime
    ) -> Verdict | None:
        """A worker died on the last attempt: the crash used up the budget, so dead-letter without running."""
        error = {
            "type": "WorkerLost",
            "message": f"the worker running attempt {job['attempts']} stopped without a result",
        }
        values = {"error": error, "dead_reason": DeadReason.WORKER_LOST, "finished_at": now, "lease_until": None}
        moved = await move(conn, self.names, job, S.DEAD_LETTERED, values=values, detail={"error": error})
        if moved is None:
            return None
        return ToDeadLetters([*events, moved[1]])

    async def renew(self, job: Row) -> bool:
        """Extend our lease; False when the job is no longer ours (fenced out by a newer run)."""
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(JOBS)
                .where(JOBS.c.id == job["id"], JOBS.c.runs == job["runs"], JOBS.c.status == S.RUNNING)
                .values(lease_until=utcnow() + timedelta(seconds=self.lease_seconds))
            )
        return result.rowcount == 1

    async def succeed(self, job: Row, result: Any) -> Pending | None:
        now = utcnow()
        values = {"result": result, "error": None, "finished_at": now, "lease_until": None}
        return await self._finish(job, S.SUCCEEDED, values, {})

    async def retry(self, job: Row, error: dict[str, Any], plan: Retry) -> Pending | None:
        values = {"error": error, "next_attempt_at": plan.next_attempt_at, "lease_until": None}
        detail = {"error": error, "next_attempt_at": plan.next_attempt_at.isoformat()}
        return await self._finish(job, S.RETRYING, values, detail)

    async def dead_letter(self, job: Row, error: dict[str, Any], plan: DeadLetter) -> Pending | None:
        values = {"error": error, "dead_reason": plan.reason, "finished_at": utcnow(), "lease_until": None}
        return await self._finish(job, S.DEAD_LETTERED, values, {"error": error, "reason": plan.reason})

    async def _finish(self, job: Row, to: JobStatus, values: Row, detail: Row) -> Pending | None:
        """Record the outcome only while our fencing token still holds; None when it does not."""
        async with self.engine.begin() as conn:
            moved = await move(
                conn, self.names, job, to, where=(JOBS.c.runs == job["runs"],), values=values, detail=detail
            )
        return moved[1] if moved else None
