"""Nothing grows forever (rule 16): jobs finished long ago (with their audit rows, deliveries and artifacts), old
delivery attempts, finished deliveries, finished jobs' audit rows, emptied workflows and ended redrives (with their
history) are deleted in batches by a background task, never in one giant delete."""

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy import ColumnElement, Select, Table, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.dml import ReturningDelete

from app.core import metrics
from app.core.resources import Resources
from app.core.statuses import TERMINAL, DeliveryStatus, JobStatus, RedriveStatus, WorkflowStatus
from app.models.tables import (
    ATTEMPTS,
    DELIVERIES,
    JOB_EVENTS,
    JOBS,
    REDRIVE_EVENTS,
    REDRIVE_ITEMS,
    REDRIVES,
    WORKFLOWS,
)
from app.models.types import utcnow
from app.services.artifacts import ArtifactService, artifact_service, remove_files
from app.services.upkeep.janitor import DlqJanitor
from app.stores.artifacts import ArtifactStore

# A job goes with its audit rows, deliveries and attempts: about this many rows. A batch of jobs holds
# RETENTION_BATCH_SIZE rows in all (100 jobs by default), so that one commit's write-ahead log stays small and the
# job path's commits, which wait for the same log, are not held up behind it. On a busy two-core machine
# (bench/retention.py, 20,000 jobs), batches of 1,000 jobs slowed a drain beside them by 20-40 %; with batches of
# 100 the drain kept 1.08 and 0.86 x of its rate, within the noise of the rounds.
ROWS_PER_JOB = 10
# After each batch of jobs, rest this many times as long as the batch took: a backlog of old jobs (the first pass
# after an upgrade, or after a long outage) is worked off at a quarter of the database's pace, so the job path
# keeps the rest. Paced so, on a busy two-core machine, some 700 jobs/s are deleted (four audit rows each).
REST_PER_BATCH = 3
# The rows that belong to a row of these tables and go in the same transaction: (table, the column naming it).
DEPENDENTS: dict[str, list[tuple[Table, ColumnElement[Any]]]] = {
    DELIVERIES.name: [(ATTEMPTS, ATTEMPTS.c.delivery_id)],
    REDRIVES.name: [(REDRIVE_EVENTS, REDRIVE_EVENTS.c.redrive_id), (REDRIVE_ITEMS, REDRIVE_ITEMS.c.redrive_id)],
}


@dataclass
class Sweep:
    """What one pass removed, per table, and in how many batches."""

    deleted: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    pruned: dict[str, int] = field(default_factory=dict)  # jobs deleted, by status


@dataclass(frozen=True)
class Retention:
    engine: AsyncEngine
    delivery_days: float
    job_days: float
    batch_size: int
    artifact_rows: ArtifactStore  # a pruned job's go with it
    artifacts: ArtifactService | None = None  # purges artifacts older than `artifact_days`
    artifact_days: float = 30
    # Finished jobs are deleted this many days after they finished, by status; a status not here, or 0, is kept.
    job_lifetimes: Mapping[JobStatus, float] = field(default_factory=dict)
    # Sweeps the broker's DLQ after dead jobs were deleted, so their messages go with them.
    janitor: DlqJanitor | None = None
    # A finished workflow is deleted once this many days have passed since it finished and none of its jobs is
    # left (each goes by its own status's lifetime); 0 keeps them.
    workflow_days: float = 0
    # A finished or cancelled redrive is deleted, with its history, this many days after it ended; 0 keeps them.
    redrive_days: float = 0

    @classmethod
    def from_settings(cls, resources: Resources) -> "Retention":
        settings, names = resources.settings, resources.names
        return cls(
            resources.engine,
            settings.retention_delivery_days,
            settings.retention_job_days,
            settings.retention_batch_size,
            resources.stores.artifacts,
            artifact_service(resources),
            settings.retention_artifact_days,
            job_lifetimes={
                JobStatus.SUCCEEDED: settings.job_retention_days,
                JobStatus.CANCELLED: settings.job_retention_days,
                JobStatus.DEAD_LETTERED: settings.dead_job_retention_days,
            },
            janitor=DlqJanitor(resources.engine, resources.broker, names.jobs_dlq, names.webhooks_dlq),
            workflow_days=settings.job_retention_days,
            redrive_days=settings.job_retention_days,
        )

    async def sweep(self, now: datetime | None = None) -> Sweep:
        """One full pass over every kind of old row."""
        now = now or utcnow()
        sweep = await self.prune_jobs(now)
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
        if self.workflow_days > 0:
            plan.append((WORKFLOWS, emptied_before(now - timedelta(days=self.workflow_days))))
        if self.redrive_days > 0:
            plan.append((REDRIVES, ended_before(now - timedelta(days=self.redrive_days))))
        for table, old in plan:
            sweep.deleted[table.name] = await self._in_batches(table, old, sweep)
        if self.artifacts is not None:
            cutoff = now - timedelta(days=self.artifact_days)
            sweep.deleted["artifacts"] = await self.artifacts.purge_older_than(cutoff, self.batch_size)
        return sweep

    async def prune_jobs(self, now: datetime) -> Sweep:
        """Delete the jobs finished longer ago than their status's lifetime, with everything that is theirs; then
        let the janitor take the DLQ messages of the dead ones."""
        sweep = Sweep()
        for status, days in self.job_lifetimes.items():
            if days > 0:
                sweep.pruned[status] = await self._prune(status, now - timedelta(days=days), sweep)
        sweep.deleted["jobs"] = sum(sweep.pruned.values())
        if sweep.pruned.get(JobStatus.DEAD_LETTERED) and self.janitor is not None:
            await self.janitor.cycle()
        return sweep

    async def _prune(self, status: JobStatus, cutoff: datetime, sweep: Sweep) -> int:
        """A batch of jobs per transaction, until none is left."""
        old = finished_before(status, cutoff, max(1, self.batch_size // ROWS_PER_JOB))
        total = 0
        while True:
            started = time.monotonic()
            async with self.engine.begin() as conn:
                ids = list((await conn.execute(old)).scalars())
                gone, files = await _delete_jobs(conn, ids, status, cutoff, self.artifact_rows) if ids else ([], [])
            if not ids:
                return total
            await remove_files(files)
            metrics.JOBS_PRUNED.labels(status).inc(len(gone))
            total += len(gone)
            sweep.batches += 1
            await asyncio.sleep((time.monotonic() - started) * REST_PER_BATCH)

    async def _in_batches(self, table: Table, old: ColumnElement[bool], sweep: Sweep) -> int:
        key = table.c.id
        total = 0
        while True:
            async with self.engine.begin() as conn:
                ids = list((await conn.execute(select(key).where(old).limit(self.batch_size))).scalars())
                if ids:
                    for dependent, owner in DEPENDENTS.get(table.name, []):
                        await conn.execute(delete(dependent).where(owner.in_(ids)))
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


def ended_before(cutoff: datetime) -> ColumnElement[bool]:
    """Redrives that finished or were cancelled before `cutoff`; a running or paused one is kept however old."""
    ended = [str(RedriveStatus.FINISHED), str(RedriveStatus.CANCELLED)]
    return REDRIVES.c.status.in_(ended) & (REDRIVES.c.finished_at < cutoff)


def emptied_before(cutoff: datetime) -> ColumnElement[bool]:
    """Workflows that finished before `cutoff` and have no job left: retention took each of them already."""
    left = select(JOBS.c.id).where(JOBS.c.workflow_id == WORKFLOWS.c.id)
    return (WORKFLOWS.c.status != str(WorkflowStatus.RUNNING)) & (WORKFLOWS.c.finished_at < cutoff) & ~left.exists()


def finished_before(status: JobStatus, cutoff: datetime, limit: int) -> Select[Any]:
    """Up to `limit` ids of jobs with `status` that finished before `cutoff`, found by the (status, finished_at)
    index. FOR UPDATE SKIP LOCKED lets two processes pruning at once take different jobs on PostgreSQL; SQLite
    and MSSQL render nothing for it, and the guard of `delete_finished` keeps them right."""
    old = select(JOBS.c.id).where(JOBS.c.status == status, JOBS.c.finished_at < cutoff)
    return old.limit(limit).with_for_update(skip_locked=True)


def delete_finished(ids: list[str], status: JobStatus, cutoff: datetime) -> ReturningDelete[Any]:
    """Delete these jobs if they still have `status` and finished before `cutoff` (a replay may have moved one
    since it was found); the ids deleted."""
    still_old = (JOBS.c.status == status) & (JOBS.c.finished_at < cutoff)
    return delete(JOBS).where(JOBS.c.id.in_(ids), still_old).returning(JOBS.c.id)


async def _delete_jobs(
    conn: AsyncConnection, ids: list[str], status: JobStatus, cutoff: datetime, artifacts: ArtifactStore
) -> tuple[list[str], list[str]]:
    """Delete these jobs as `delete_finished` does, and their deliveries, attempts and artifact rows; their audit
    rows go with them (ON DELETE CASCADE). The ids deleted, and the artifact files to remove once the transaction
    commits."""
    gone = list((await conn.execute(delete_finished(ids, status, cutoff))).scalars())
    if not gone:
        return [], []
    theirs = select(DELIVERIES.c.id).where(DELIVERIES.c.job_id.in_(gone))
    await conn.execute(delete(ATTEMPTS).where(ATTEMPTS.c.delivery_id.in_(theirs)))
    await conn.execute(delete(DELIVERIES).where(DELIVERIES.c.job_id.in_(gone)))
    return gone, await artifacts.drop(conn, gone)
