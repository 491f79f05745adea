"""The job types' rows on every database SQLAlchemy speaks (PostgreSQL, SQLite, MSSQL by rendering)."""

from datetime import datetime

from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.statuses import JobStatus
from app.models.tables import JOB_TYPE_PAUSES, JOBS
from app.stores.job_types import Counts

PAUSES = JOB_TYPE_PAUSES
PAUSED = select(PAUSES.c.job_type, PAUSES.c.paused_at)


class SqlJobTypes:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def paused(self) -> dict[str, datetime]:
        """Every paused job type, with when it was paused: one read of a table of a few rows."""
        async with self.engine.connect() as conn:
            return {row.job_type: row.paused_at for row in await conn.execute(PAUSED)}

    async def pause(self, job_type: str, at: datetime) -> None:
        """Pause a job type; paused already (by this call's twin a moment ago, say), it keeps its first time."""
        exists = select(PAUSES.c.job_type).where(PAUSES.c.job_type == job_type)
        try:
            async with self.engine.begin() as conn:
                if (await conn.execute(exists)).first() is None:
                    await conn.execute(insert(PAUSES).values(job_type=job_type, paused_at=at))
        except IntegrityError:
            return  # another pause of the same type committed between the read and the insert

    async def resume(self, job_type: str) -> None:
        """Resume a job type (one not paused: nothing changes)."""
        async with self.engine.begin() as conn:
            await conn.execute(delete(PAUSES).where(PAUSES.c.job_type == job_type))

    async def counts(self, client_id: str | None, statuses: tuple[JobStatus, ...]) -> Counts:
        """Jobs in `statuses` by type and status, in one grouped read: a client's, or every client's."""
        query = (
            select(JOBS.c.job_type, JOBS.c.status, func.count())
            .where(JOBS.c.status.in_([str(status) for status in statuses]))
            .group_by(JOBS.c.job_type, JOBS.c.status)
        )
        if client_id is not None:
            query = query.where(JOBS.c.client_id == client_id)
        async with self.engine.connect() as conn:
            return {(row[0], JobStatus(row[1])): int(row[2]) for row in await conn.execute(query)}
