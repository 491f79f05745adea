"""Workflows as the API serves them: submit (the workflow, its jobs and its edges in one transaction, then the
jobs free to start published), read, list, cancel."""

import uuid
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from loguru import logger
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.messages import job_event
from app.core.statuses import JobStatus, WorkflowStatus
from app.models.rows import JobRow, job_row, job_with
from app.models.tables import JOB_DEPENDENCIES, JOBS, WORKFLOWS
from app.models.types import utcnow
from app.schemas.workflow import WorkflowEnvelope, WorkflowItem
from app.services import uniqueness
from app.services.idempotency import IdempotencyConflict, earlier_jobs
from app.services.jobs import JobService
from app.services.run_stops import RunStops
from app.services.submit import Draft, as_queued, insert_drafts, new_drafts
from app.services.tenancy import Principal, visible_to
from app.services.uniqueness import UniqueHeld
from app.stores import steps
from app.stores.flow.fair import LaneRef
from app.stores.pagination import newest_first
from app.stores.workflows.follow import job_counts

S = JobStatus
Workflow = dict[str, Any]  # a workflows row, with `counts` and (one workflow) `jobs` as the API answers it
CANCEL_TRIES = 3


class CancelRaced(Exception):
    """A workflow's cancel kept losing its compare-and-sets to jobs that moved meanwhile."""


@dataclass
class WorkflowService:
    jobs: JobService
    stops: RunStops

    async def submit(
        self, principal: Principal, envelope: WorkflowEnvelope, items: list[WorkflowItem], request_id: str | None
    ) -> Workflow:
        """Save the workflow, its jobs and its edges in one transaction, all or nothing; then publish the jobs
        that may start now. Those with dependencies wait in the database (rule 18) until their outcomes release
        them. An item's idempotency key taken already raises IdempotencyConflict, its unique key held by a job
        UniqueHeld (a job outside the workflow cannot stand in for its item), nothing saved."""
        service, now = self.jobs, utcnow()
        workflow_id = str(uuid.uuid4())
        drafts = new_drafts(service.names, principal.client_id, [i.request for i in items], request_id, service.box)
        await _unique_free(service.engine, drafts)
        ids = {item.ref: draft.job["id"] for item, draft in zip(items, drafts, strict=True)}
        shaped = [self._shaped(workflow_id, item, draft, ids) for item, draft in zip(items, drafts, strict=True)]
        refill: list[LaneRef] = []
        if service.fairness is not None:  # the jobs free to start take their client's turns like any other
            shaped, refill = await service.fairness.admit(shaped)
        workflow = {
            "id": workflow_id,
            "client_id": principal.client_id,
            "name": envelope.name,
            "status": str(WorkflowStatus.RUNNING),
            "on_failure": str(envelope.on_failure),
            "jobs_total": len(items),
            "unfinished": len(items),
            "seq": 0,
            "request_id": request_id,
            "created_at": now,
            "updated_at": now,
            "finished_at": None,
        }
        edges = [
            {"depends_on_id": ids[ref], "job_id": ids[item.ref], "workflow_id": workflow_id}
            for item in items
            for ref in item.depends_on
        ]
        try:
            async with service.store.transaction() as conn:
                await conn.execute(insert(WORKFLOWS), [workflow])
                staged = await insert_drafts(service.store, conn, shaped)
                if edges:
                    await conn.execute(insert(JOB_DEPENDENCIES), edges)
        except IntegrityError as exc:  # an item's idempotency key is an earlier job's: name that item
            keyed = [d for d in shaped if d.key is not None]
            earlier = await earlier_jobs(service.engine, principal.client_id, keyed) if keyed else {}
            taken = next((d for d in keyed if d.index in earlier), None)
            if taken is None:
                await _unique_free(service.engine, shaped)  # or its unique key, taken since the look before
                raise
            raise IdempotencyConflict.of(taken) from exc
        try:
            confirmed = await service.outbox.publish(staged)
        except Exception:  # committed: the relay publishes what this could not
            logger.exception("publishing workflow {}'s jobs failed; the relay will", workflow_id)
            confirmed = [False] * len(staged)
        if refill:
            try:
                await service.fairness.release(refill)  # type: ignore[union-attr]
            except Exception as exc:
                logger.warning("releasing jobs waiting their turn failed; the held_release loop will: {}", exc)
        answered = [as_queued(d.job) if ok and not d.waits else d.job for d, ok in zip(shaped, confirmed, strict=True)]
        return _with_jobs(workflow, answered)

    def _shaped(self, workflow_id: str, item: WorkflowItem, draft: Draft, ids: dict[str, str]) -> Draft:
        """A job draft as a workflow's: its workflow, ref and dependencies; `waiting` (its outbox row the
        `job.waiting` event, no lane message) when it has dependencies."""
        depends_on = [ids[ref] for ref in item.depends_on]
        job = job_with(draft.job, workflow_id=workflow_id, ref=item.ref, depends_on=depends_on)
        job = job_with(job, deps_left=len(depends_on))
        if not depends_on:
            return replace(draft, job=job)
        job = job_with(job, status=str(S.WAITING), seq=1)
        return replace(draft, job=job, message=job_event(self.jobs.names, job, job["created_at"]))

    async def get(self, principal: Principal, workflow_id: str) -> Workflow | None:
        """The workflow with its jobs, if the caller may see it."""
        async with self.jobs.engine.connect() as conn:
            row = await _visible(conn, principal, workflow_id)
            if row is None:
                return None
            jobs = await conn.execute(
                select(JOBS).where(JOBS.c.workflow_id == workflow_id).order_by(JOBS.c.created_at, JOBS.c.id)
            )
            return _with_jobs(row, [job_row(r._mapping) for r in jobs])

    async def page(
        self, principal: Principal, status: str | None, limit: int, cursor: str | None
    ) -> tuple[list[Workflow], str | None]:
        """Newest first, each with its jobs' counts; the cursor to the next page when more may follow."""
        query = select(WORKFLOWS).where(visible_to(WORKFLOWS, principal))
        if status:
            query = query.where(WORKFLOWS.c.status == status)
        rows, after = await newest_first(self.jobs.engine, WORKFLOWS, query, limit, cursor, "workflows")
        counts: dict[str, dict[str, int]] = {}
        if rows:
            async with self.jobs.engine.connect() as conn:
                counts = await job_counts(conn, [r["id"] for r in rows])
        return [{**r, "counts": counts.get(r["id"], {}), "jobs": []} for r in rows], after

    async def cancel(self, principal: Principal, workflow_id: str) -> Workflow | None:
        """Every job of the workflow that has not started -> cancelled, in one transaction with what follows;
        then every running one asked to stop, as a job's cancel asks it (the workflow ends once they have)."""
        async with self.jobs.engine.connect() as conn:
            if await _visible(conn, principal, workflow_id) is None:
                return None
        store = self.jobs.store
        for _ in range(CANCEL_TRIES):
            async with store.transaction() as conn:
                query = (
                    select(JOBS)
                    .where(JOBS.c.workflow_id == workflow_id, steps.CANCEL.guard())
                    .order_by(JOBS.c.id)
                    .with_for_update()
                )
                open_jobs = [job_row(r._mapping) for r in await conn.execute(query)]
                cancelled, staged = await store.cancel_all(conn, open_jobs)
            await self.jobs.outbox.publish(staged)
            if len(cancelled) == len(open_jobs):
                break
        else:
            raise CancelRaced(workflow_id)
        await self._stop_running(workflow_id)
        return await self.get(principal, workflow_id)

    async def _stop_running(self, workflow_id: str) -> None:
        """Ask the runs of the workflow's running jobs to stop (each ends cancelled, unless it finishes first)."""
        store = self.jobs.store
        async with store.transaction() as conn:
            query = select(JOBS).where(JOBS.c.workflow_id == workflow_id, JOBS.c.status == S.RUNNING)
            asked = await store.request_cancel(conn, [job_row(r._mapping) for r in await conn.execute(query)])
        await self.stops.tell([job["id"] for job in asked])


async def _visible(conn: AsyncConnection, principal: Principal, workflow_id: str) -> dict[str, Any] | None:
    """The workflow's row, if the caller may see it."""
    query = select(WORKFLOWS).where(WORKFLOWS.c.id == workflow_id, visible_to(WORKFLOWS, principal))
    row = (await conn.execute(query)).first()
    return dict(row._mapping) if row else None


def _with_jobs(workflow: dict[str, Any], jobs: list[JobRow]) -> Workflow:
    """A workflow as one is answered: its jobs' counts by status, and its jobs, each with the refs it depends on."""
    refs = {job["id"]: job["ref"] for job in jobs}
    entries = [
        {"ref": job["ref"], "job": job, "depends_on": [refs.get(i, i) for i in job["depends_on"] or []]} for job in jobs
    ]
    return {**workflow, "counts": dict(Counter(str(job["status"]) for job in jobs)), "jobs": entries}


async def _unique_free(engine: AsyncEngine, drafts: list[Draft]) -> None:
    """Raise UniqueHeld for the first item whose unique key a job holds, or another item of the workflow."""
    first: dict[str, Draft] = {}
    for draft in drafts:
        if draft.unique is not None and (earlier := first.setdefault(draft.unique, draft)) is not draft:
            raise UniqueHeld(draft, f"item {earlier.index}")
    held = await uniqueness.holders(engine, drafts)
    if held:
        index = min(held)
        raise UniqueHeld(drafts[index], f"job {held[index]['id']}")
