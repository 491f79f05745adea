"""The dead-letter queue: what died and why, and sending it back to work."""

from fastapi import APIRouter

from app.api.deps import PAGE_SIZE, CursorQuery, LimitQuery, PrincipalDep, StateDep
from app.schemas.dlq import DeadJobOut, DeadJobPage, DlqStats, ReplayIn, ReplayOut

router = APIRouter(prefix="/api/v1/dlq", tags=["dead-letter queue"])


@router.get("", response_model=DeadJobPage)
async def list_dead_jobs(
    state: StateDep,
    principal: PrincipalDep,
    job_type: str | None = None,
    limit: LimitQuery = PAGE_SIZE,
    cursor: CursorQuery = None,
) -> DeadJobPage:
    """Dead-lettered jobs, newest first, with the reason, attempts and last error."""
    rows, next_cursor = await state.dlq.page(principal, job_type, limit, cursor)
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
    """Send dead jobs back to work, oldest first: by ids, by type, or all, up to `limit`."""
    ids = await state.dlq.replay(principal, body.job_ids, body.job_type, body.limit)
    return ReplayOut(replayed=len(ids), job_ids=ids)
