"""The job types' rows: which types an operator paused (`job_type_pauses`), and how many jobs of each wait or run.

One implementation, `sql.SqlJobTypes`, serves every database (PostgreSQL, SQLite, MSSQL by rendering): the job
worker reads the paused types about once a second, and nothing else here is hot, so no statement has a PostgreSQL
twin. Holding and releasing the jobs themselves are the jobs store's (`JobStore.hold`, `JobStore.release`)."""

from datetime import datetime
from typing import Protocol

from app.core.statuses import JobStatus

Counts = dict[tuple[str, JobStatus], int]  # (job type, status) -> jobs


class JobTypeStore(Protocol):
    async def paused(self) -> dict[str, datetime]:
        """Every paused job type, with when it was paused."""

    async def pause(self, job_type: str, at: datetime) -> None:
        """Pause a job type (again: nothing changes)."""

    async def resume(self, job_type: str) -> None:
        """Resume a job type (one not paused: nothing changes)."""

    async def counts(self, client_id: str | None, statuses: tuple[JobStatus, ...]) -> Counts:
        """Jobs in `statuses` by type and status: a client's, or every client's when `client_id` is None."""
