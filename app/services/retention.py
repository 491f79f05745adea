"""Nothing grows forever (rule 16): old delivery attempts, finished deliveries and finished jobs' audit rows
are deleted in batches by a background task, never in one giant delete."""

import asyncio
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from loguru import logger
from sqlalchemy import ColumnElement, Table, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.resources import Resources
from app.core.statuses import TERMINAL, DeliveryStatus
from app.models.tables import ATTEMPTS, DELIVERIES, JOB_EVENTS, JOBS
from app.models.types import utcnow
from app.services.artifacts import ArtifactStore, artifact_store


@dataclass
class Sweep:
    """What one pass removed, per table, and in how many batches."""

    deleted: dict[str, int] = field(default_factory=dict)
    batches: int = 0


@dataclass(frozen=True)
class Retention:
    engine: AsyncEngine
    delivery_days: float
    job_days: float
    batch_size: int
    artifacts: ArtifactStore | None = None
    artifact_days: float = 30

    @classmethod
    def from_settings(cls, resources: Resources) -> "Retention":
        settings = resources.settings
        return cls(
            resources.engine,
            settings.retention_delivery_days,
            settings.retention_job_days,
            settings.retention_batch_size,
            artifact_store(resources),
            settings.retention_artifact_days,
        )

    async def sweep(self, now: datetime | None = None) -> Sweep:
        """One full pass over every kind of old row."""
        now = now or utcnow()
        deliveries_cutoff = now - timedelta(days=self.delivery_days)
        jobs_cutoff = now - timedelta(days=self.job_days)
        finished_long_ago = select(JOBS.c.id).where(
            JOBS.c.status.in_([str(s) for s in TERMINAL]), JOBS.c.finished_at < jobs_cutoff
        )
        plan: list[tuple[Table, ColumnElement[bool]]] = [
            (ATTEMPTS, ATTEMPTS.c.created_at < deliveries_cutoff),
            (
                DELIVERIES,
                (DELIVERIES.c.created_at < deliveries_cutoff) & (DELIVERIES.c.status != DeliveryStatus.PENDING),
            ),
            (JOB_EVENTS, JOB_EVENTS.c.job_id.in_(finished_long_ago) & (JOB_EVENTS.c.created_at < jobs_cutoff)),
        ]
        sweep = Sweep()
        for table, old in plan:
            sweep.deleted[table.name] = await self._in_batches(table, old, sweep)
        if self.artifacts is not None:
            cutoff = now - timedelta(days=self.artifact_days)
            sweep.deleted["artifacts"] = await self.artifacts.purge_older_than(cutoff, self.batch_size)
        return sweep

    async def _in_batches(self, table: Table, old: ColumnElement[bool], sweep: Sweep) -> int:
        key = table.c.id
        total = 0
        while True:
            async with self.engine.begin() as conn:
                ids = list((await conn.execute(select(key).where(old).limit(self.batch_size))).scalars())
                if table is DELIVERIES and ids:
                    await conn.execute(delete(ATTEMPTS).where(ATTEMPTS.c.delivery_id.in_(ids)))
                if ids:
                    await conn.execute(delete(table).where(key.in_(ids)))
            if not ids:
                return total
            total += len(ids)
            sweep.batches += 1
            await asyncio.sleep(0)  # let other work in between batches

    async def cycle(self) -> None:
        """One cycle of the background worker: a sweep, logged when it removed anything."""
        sweep = await self.sweep()
        if any(sweep.deleted.values()):
            logger.info("retention removed {} in {} batch(es)", sweep.deleted, sweep.batches)
