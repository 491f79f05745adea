"""Confirmed submits, in batches: once the broker has a job's message, the job moves pending -> queued and
its outbox row goes. Many submits share one transaction, off the request's critical path; until it commits a
job reads `pending` (a worker that gets there first claims it from `pending` all the same)."""

import asyncio
from dataclasses import dataclass, field

from loguru import logger
from sqlalchemy import insert, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.database import is_unreachable
from app.core.messages import job_event
from app.core.names import Names
from app.core.statuses import JobStatus
from app.models.tables import JOB_EVENTS, JOBS, OUTBOX
from app.models.types import utcnow
from app.services import outbox as outbox_rows
from app.services.outbox import Outbox, Pending
from app.services.transitions import Row

MAX_BATCH = 500
LINGER_SECONDS = 0.002  # how long the first confirmation waits for company


@dataclass
class Confirmations:
    engine: AsyncEngine
    outbox: Outbox
    names: Names
    _waiting: list[tuple[Row, Pending]] = field(default_factory=list)
    _flusher: "asyncio.Task[None] | None" = None

    def add(self, job: Row, staged: Pending) -> Row:
        """Record that the broker confirmed this job; return it as it is about to be (queued)."""
        self._waiting.append((job, staged))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="confirmations")
        return _queued(job, utcnow())

    async def _flush(self) -> None:
        await asyncio.sleep(LINGER_SECONDS)
        while self._waiting:
            batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
            try:
                await self.outbox.publish(await self._apply(batch))
            except Exception as exc:  # the relay republishes the rows; workers claim from pending anyway
                level = "WARNING" if is_unreachable(exc) else "ERROR"
                logger.opt(exception=level == "ERROR").log(
                    level, "could not mark {} job(s) queued: {}", len(batch), exc
                )

    async def _apply(self, batch: list[tuple[Row, Pending]]) -> list[Pending]:
        now = utcnow()
        jobs = {job["id"]: job for job, _ in batch}
        async with self.engine.begin() as conn:
            moved = await conn.execute(
                update(JOBS)
                .where(JOBS.c.id.in_(list(jobs)), JOBS.c.status == JobStatus.PENDING, JOBS.c.seq == 0)
                .values(status=str(JobStatus.QUEUED), seq=1, updated_at=now)
                .returning(JOBS.c.id)
            )
            queued = [_queued(jobs[job_id], now) for job_id in moved.scalars()]
            if queued:
                trail = {"from": str(JobStatus.PENDING), "to": str(JobStatus.QUEUED), "attempt": 0}
                await conn.execute(
                    insert(JOB_EVENTS),
                    [{"job_id": j["id"], "event": "queued", "detail": trail, "created_at": now} for j in queued],
                )
            events = [job_event(self.names, job, now) for job in queued]
            staged = await outbox_rows.add_many(conn, events)
            await conn.execute(OUTBOX.delete().where(OUTBOX.c.id.in_([p.id for _, p in batch])))
        return staged

    async def close(self) -> None:
        """Apply what is waiting (shutdown)."""
        if self._flusher is not None:
            await asyncio.gather(self._flusher, return_exceptions=True)


def _queued(job: Row, now: object) -> Row:
    return {**job, "status": str(JobStatus.QUEUED), "seq": 1, "updated_at": now}
