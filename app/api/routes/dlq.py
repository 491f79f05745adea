"""The dead-letter queue: what died and why, grouped by failure, and sending it back to work (docs/dlq.md)."""

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query

from app.api.admission import edited_payload
from app.api.deps import PAGE_SIZE, CursorQuery, LimitQuery, PrincipalDep, StateDep
from app.api.errors import ApiError, not_found
from app.schemas.dlq import (
    GROUP_ID,
    DeadJobOut,
    DeadJobPage,
    DlqStats,
    FailureGroupOut,
    FailureGroupPage,
    ReplayIn,
    ReplayOneIn,
    ReplayOut,
)
from app.schemas.job import JobOut
from app.services.dlq import NotDeadLettered

router = APIRouter(prefix="/api/v1/dlq", tags=["dead-letter queue"])
GroupQuery = Annotated[
    str | None, Query(pattern=GROUP_ID, description="A failure group's id (`GET /api/v1/dlq/groups`).")
]
ONE_JOB: dict[int | str, dict[str, str]] = {
    404: {"description": "No such job."},
    409: {"description": "The job is not dead-lettered."},
}


@router.get("", response_model=DeadJobPage)
async def list_dead_jobs(
    state: StateDep,
    principal: PrincipalDep,
    job_type: str | None = None,
    group: GroupQuery = None,
    limit: LimitQuery = PAGE_SIZE,
    cursor: CursorQuery = None,
) -> DeadJobPage:
    """Dead-lettered jobs, newest first, with the reason, attempts and last error; `group` keeps one failure
    group's."""
    rows, next_cursor = await state.dlq.page(principal, job_type, limit, cursor, group)
    items = [DeadJobOut.model_validate({**row, "reason": row["dead_reason"]}) for row in rows]
    return DeadJobPage(items=items, next_cursor=next_cursor)


@router.get("/stats", response_model=DlqStats, response_model_exclude_none=True)
async def dlq_stats(state: StateDep, principal: PrincipalDep) -> DlqStats:
    """Counts of your dead-lettered jobs; an admin also gets `broker_depth`, the broker's DLQ depth (for any other
    key the field is absent)."""
    stats = DlqStats.model_validate(await state.dlq.stats(principal))
    if principal.admin:
        stats.broker_depth = await state.resources.broker.queue_depth(state.resources.names.jobs_dlq)
    return stats


@router.post("/replay", response_model=ReplayOut)
async def replay(body: ReplayIn, state: StateDep, principal: PrincipalDep) -> ReplayOut:
    """Send dead jobs back to work, oldest first: by ids, by type, by failure group, or all, up to `limit`; each
    job in a transaction of its own."""
    ids = await state.dlq.replay(principal, body.job_ids, body.job_type, body.limit, body.group)
    return ReplayOut(replayed=len(ids), job_ids=ids)


@router.get("/groups", response_model=FailureGroupPage)
async def failure_groups(
    state: StateDep,
    principal: PrincipalDep,
    job_type: str | None = None,
    limit: LimitQuery = PAGE_SIZE,
    cursor: CursorQuery = None,
) -> FailureGroupPage:
    """Dead jobs grouped by failure, biggest group first: a group is a job type, an error class and the message with
    its ids, numbers, times and quoted values masked; each comes with its count, first and last seen and an example
    job (ties: the one seen last first). Your jobs only; an admin's, every client's."""
    groups, next_cursor = await state.dlq_groups.page(principal, job_type, limit, cursor)
    return FailureGroupPage(items=[FailureGroupOut.model_validate(g) for g in groups], next_cursor=next_cursor)


@router.get("/groups/{group_id}", response_model=FailureGroupOut, responses={404: {"description": "No such group."}})
async def failure_group(group_id: str, state: StateDep, principal: PrincipalDep) -> FailureGroupOut:
    """One failure group of your dead jobs: its count, first and last seen and an example; 404 when none of your
    dead jobs is in it."""
    group = await state.dlq_groups.one(principal, group_id)
    if group is None:
        raise ApiError(404, "not_found", "None of your dead-lettered jobs is in a failure group with that id.")
    return FailureGroupOut.model_validate(group)


@router.post("/{job_id}/replay", response_model=JobOut, responses=ONE_JOB)
async def replay_one(job_id: str, state: StateDep, principal: PrincipalDep, body: ReplayOneIn | None = None) -> JobOut:
    """Send one dead job back to work; with `payload`, with that payload instead (checked by its job type's model
    as a submit is, credentials sealed), the change and the replay in one transaction and in the job's audit trail
    as `edited` (who, the payload before and after)."""
    try:
        if body is None or body.payload is None:
            job = await state.dlq.retry(principal, job_id)
        else:
            job = await state.dlq.edit(principal, job_id, body.payload, partial(edited_payload, state))
    except NotDeadLettered as exc:
        raise ApiError(409, "not_dead_lettered", "Only a dead-lettered job can be replayed; this one is not.") from exc
    if job is None:
        raise not_found("job")
    return JobOut.model_validate(job)
