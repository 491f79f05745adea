"""The artifacts' rows on every database SQLAlchemy speaks (PostgreSQL, SQLite, MSSQL by rendering). The one
implementation: none of these statements is hot, so none has a PostgreSQL twin."""

from datetime import datetime
from typing import cast

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.models.rows import ArtifactRow
from app.models.tables import ARTIFACTS
from app.stores.owned import owned_by


class SqlArtifacts:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def put(self, artifact: ArtifactRow) -> None:
        """The job's artifact row, replacing an earlier run's, in one transaction."""
        async with self.engine.begin() as conn:
            await conn.execute(delete(ARTIFACTS).where(ARTIFACTS.c.job_id == artifact["job_id"]))
            await conn.execute(insert(ARTIFACTS).values(**artifact))

    async def get(self, job_id: str, client_id: str | None) -> ArtifactRow | None:
        """The job's artifact row, unless `client_id` may not see it (None sees every client's)."""
        query = select(ARTIFACTS).where(ARTIFACTS.c.job_id == job_id, owned_by(ARTIFACTS, client_id))
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return cast(ArtifactRow, dict(row._mapping)) if row else None

    async def drop_older_than(self, cutoff: datetime, limit: int) -> tuple[int, list[str]]:
        """Delete up to `limit` rows created before `cutoff`, in a transaction of their own: how many went, and the
        paths of their files, to remove now that it committed."""
        old = select(ARTIFACTS.c.job_id, ARTIFACTS.c.path).where(ARTIFACTS.c.created_at < cutoff).limit(limit)
        async with self.engine.begin() as conn:
            rows = (await conn.execute(old)).all()
            if rows:
                await conn.execute(delete(ARTIFACTS).where(ARTIFACTS.c.job_id.in_([row.job_id for row in rows])))
        return len(rows), [row.path for row in rows if row.path]

    async def drop(self, conn: AsyncConnection, job_ids: list[str]) -> list[str]:
        """Delete these jobs' rows in the caller's transaction: the paths of their files, to remove once it commits
        (a file removed before a rollback would leave a row without its bytes)."""
        deleted = delete(ARTIFACTS).where(ARTIFACTS.c.job_id.in_(job_ids)).returning(ARTIFACTS.c.path)
        return [path for path in (await conn.execute(deleted)).scalars() if path]
