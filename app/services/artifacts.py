"""Job artifacts behind one small interface: bytes in the database or under a directory, metadata in the
database, so any API process can serve any job's file."""

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, cast

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.resources import Resources
from app.models.rows import ArtifactRow
from app.models.tables import ARTIFACTS
from app.models.types import utcnow
from app.services.tenancy import Principal, visible_to


def artifact_url(job_id: str) -> str:
    return f"/api/v1/jobs/{job_id}/artifact"


@dataclass(frozen=True)
class ArtifactStore:
    engine: AsyncEngine
    storage: Literal["database", "directory"]
    directory: Path

    async def save(self, job_id: str, client_id: str, data: bytes, content_type: str, filename: str) -> str:
        """Store the job's file, replacing an earlier run's; return its URL path."""
        path = None
        if self.storage == "directory":
            path = await asyncio.to_thread(self._write, job_id, data)
        row = {
            "job_id": job_id,
            "client_id": client_id,
            "content_type": content_type,
            "filename": filename,
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "data": data if path is None else None,
            "path": path,
            "created_at": utcnow(),
        }
        async with self.engine.begin() as conn:
            await conn.execute(delete(ARTIFACTS).where(ARTIFACTS.c.job_id == job_id))
            await conn.execute(insert(ARTIFACTS).values(**row))
        return artifact_url(job_id)

    def _write(self, job_id: str, data: bytes) -> str:
        target = self.directory / job_id[:2] / job_id
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_bytes(data)
        partial.replace(target)  # atomic: a reader never sees half a file
        return str(target)

    async def load(self, principal: Principal, job_id: str) -> tuple[ArtifactRow, bytes] | None:
        """The job's file and its metadata, if the caller may see the job; None otherwise."""
        query = select(ARTIFACTS).where(ARTIFACTS.c.job_id == job_id, visible_to(ARTIFACTS, principal))
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            return None
        meta = cast(ArtifactRow, dict(row._mapping))
        if meta["path"]:
            try:
                return meta, await asyncio.to_thread(Path(meta["path"]).read_bytes)
            except FileNotFoundError:
                return None
        return meta, meta["data"] or b""

    async def purge_older_than(self, cutoff: datetime, batch_size: int) -> int:
        """Delete artifacts (rows and files) created before `cutoff`, a batch at a time."""
        total = 0
        while True:
            async with self.engine.begin() as conn:
                query = select(ARTIFACTS.c.job_id, ARTIFACTS.c.path).where(ARTIFACTS.c.created_at < cutoff)
                rows = (await conn.execute(query.limit(batch_size))).all()
                if not rows:
                    return total
                await conn.execute(delete(ARTIFACTS).where(ARTIFACTS.c.job_id.in_([r.job_id for r in rows])))
            for row in rows:
                if row.path:
                    await asyncio.to_thread(Path(row.path).unlink, missing_ok=True)
            total += len(rows)


async def drop_rows_of(conn: AsyncConnection, job_ids: list[str]) -> list[str]:
    """Delete these jobs' artifact rows in `conn`'s transaction; the paths of their files, to remove once it
    commits (a file removed before a rollback would leave a row without its bytes)."""
    deleted = delete(ARTIFACTS).where(ARTIFACTS.c.job_id.in_(job_ids)).returning(ARTIFACTS.c.path)
    return [path for path in (await conn.execute(deleted)).scalars() if path]


async def remove_files(paths: list[str]) -> None:
    """Remove artifact files whose rows are gone; one already missing is no error."""
    for path in paths:
        await asyncio.to_thread(Path(path).unlink, missing_ok=True)


def artifact_store(resources: Resources) -> ArtifactStore:
    """The store the settings ask for."""
    settings = resources.settings
    return ArtifactStore(resources.engine, settings.artifact_storage, Path(settings.artifact_dir))
