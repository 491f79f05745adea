"""Confirmed submits, in group commits: once the broker has a job's message, the job moves pending -> queued and
its outbox row goes. Off the request's critical path, many submits share one transaction: one UPDATE moves them
all (`transitions.queue_many`, which also stages their `queued` events), one DELETE drops their outbox rows.
Until it commits a job reads `pending` (a worker that gets there first claims it from `pending` all the same)."""

import asyncio
from datetime import datetime

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.database import is_unreachable
from app.core.group_commit import GroupCommit
from app.core.names import Names
from app.core.statuses import JobStatus
from app.models.types import utcnow
from app.services import outbox as outbox_rows
from app.services.outbox import Outbox, Pending
from app.services.transitions import Row, queue_many

Confirmed = list[tuple[Row, Pending]]  # jobs whose messages the broker confirmed, with their outbox rows

MAX_GROUPS = 64  # submit batches per transaction
ROWS_PER_STATEMENT = 500  # keeps every IN list within MSSQL's 2,100 parameters


def as_queued(job: Row, now: datetime | None = None) -> Row:
    """A confirmed job as it is about to be: queued."""
    return {**job, "status": str(JobStatus.QUEUED), "seq": job["seq"] + 1, "updated_at": now or utcnow()}


class Confirmations:
    """Applies confirmed submits in the background, in group commits; the relay heals what fails."""

    def __init__(self, engine: AsyncEngine, outbox: Outbox, names: Names) -> None:
        self._engine = engine
        self._outbox = outbox
        self._names = names
        self._tasks: set[asyncio.Task[None]] = set()
        self.commit: GroupCommit[Confirmed, None] = GroupCommit(
            "confirmations", self._apply, MAX_GROUPS, systemic=is_unreachable
        )

    def add(self, confirmed: Confirmed) -> None:
        """Record that the broker has these jobs' messages; applied soon, off the caller's path."""
        task = asyncio.create_task(self._confirm(confirmed), name="confirmations")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _confirm(self, confirmed: Confirmed) -> None:
        try:
            await self.commit.run(confirmed)
        except Exception as exc:  # the relay republishes the rows and queues the jobs; workers claim from pending
            level = "WARNING" if is_unreachable(exc) else "ERROR"
            logger.opt(exception=level == "ERROR").log(
                level, "could not mark {} job(s) queued: {}", len(confirmed), exc
            )

    async def _apply(self, groups: list[Confirmed]) -> list[None]:
        confirmed = [one for group in groups for one in group]
        events: list[Pending] = []
        async with self._engine.begin() as conn:
            for start in range(0, len(confirmed), ROWS_PER_STATEMENT):
                events += await self._queue(conn, confirmed[start : start + ROWS_PER_STATEMENT])
        if events:
            self._outbox.publish_soon(events)
        return [None] * len(groups)

    async def _queue(self, conn: AsyncConnection, confirmed: Confirmed) -> list[Pending]:
        moved = await queue_many(conn, self._names, [job for job, _ in confirmed])
        await outbox_rows.drop(conn, [staged.id for _, staged in confirmed])
        return [event for _, event in moved]

    async def close(self) -> None:
        """Apply what is waiting (shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.commit.close()
