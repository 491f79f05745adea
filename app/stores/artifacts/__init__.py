"""The artifacts' rows: a job's file's metadata, and its bytes too when they are kept in the database. Files kept
under a directory are the artifact service's to write and remove; the rows here only name their paths.

One implementation, `sql.SqlArtifacts`, serves every database (PostgreSQL, SQLite, MSSQL by rendering): a job saves
one artifact at most and a download reads one, so no statement is hot enough for a PostgreSQL twin."""

from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from app.models.rows import ArtifactRow


class ArtifactStore(Protocol):
    async def put(self, artifact: ArtifactRow) -> None:
        """The job's artifact row, replacing an earlier run's, in one transaction."""

    async def get(self, job_id: str, client_id: str | None) -> ArtifactRow | None:
        """The job's artifact row, unless `client_id` may not see it (None sees every client's)."""

    async def drop_older_than(self, cutoff: datetime, limit: int) -> tuple[int, list[str]]:
        """Delete up to `limit` rows created before `cutoff`, in a transaction of their own: how many went, and the
        paths of their files, to remove now that it committed."""

    async def drop(self, conn: AsyncConnection, job_ids: list[str]) -> list[str]:
        """Delete these jobs' rows in the caller's transaction: the paths of their files, to remove once it commits
        (a file removed before a rollback would leave a row without its bytes)."""
