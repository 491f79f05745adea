"""Job artifacts behind one small interface: bytes in the database or under a directory, metadata in the
database (the artifacts store's rows), so any API process can serve any job's file."""

import asyncio
import hashlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from app.core.resources import Resources
from app.models.rows import ArtifactRow
from app.models.types import utcnow
from app.services.tenancy import Principal
from app.stores.artifacts import ArtifactStore


def artifact_url(job_id: str) -> str:
    return f"/api/v1/jobs/{job_id}/artifact"


@dataclass(frozen=True)
class ArtifactService:
    store: ArtifactStore
    storage: Literal["database", "directory"]
    directory: Path

    async def save(self, job_id: str, client_id: str, data: bytes, content_type: str, filename: str) -> str:
        """Store the job's file, replacing an earlier run's; return its URL path."""
        path = None
        if self.storage == "directory":
            path = await asyncio.to_thread(self._write, job_id, data)
        row: ArtifactRow = {
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
        await self.store.put(row)
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
        meta = await self.store.get(job_id, principal.scope)
        if meta is None:
            return None
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
            count, paths = await self.store.drop_older_than(cutoff, batch_size)
            if not count:
                return total
            await remove_files(paths)
            total += count


async def remove_files(paths: list[str]) -> None:
    """Remove artifact files whose rows are gone; one already missing is no error."""
    for path in paths:
        await asyncio.to_thread(Path(path).unlink, missing_ok=True)


def artifact_service(resources: Resources) -> ArtifactService:
    """The artifacts the settings ask for: bytes in the database or under ARTIFACT_DIR."""
    settings = resources.settings
    return ArtifactService(resources.stores.artifacts, settings.artifact_storage, Path(settings.artifact_dir))
