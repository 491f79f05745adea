"""The overview an operator reads first: jobs by status and type, the last hour, timings, the DLQ, failing
endpoints (docs/dashboard.md#overview)."""

from fastapi import APIRouter

from app.api.deps import PrincipalDep, StateDep
from app.schemas.overview import OverviewOut

router = APIRouter(prefix="/api/v1", tags=["operations"])


@router.get("/overview", response_model=OverviewOut, summary="Jobs by status and type, the last hour, the DLQ")
async def overview(state: StateDep, principal: PrincipalDep) -> OverviewOut:
    """Counts by status and by type, per-minute throughput and failure rate over the last hour, p50/p95 run time
    and queue wait per type, the DLQ's size and 24-hour trend, and the webhook endpoints failing now: your jobs'
    (an admin's: every client's). Read from the database and kept `OVERVIEW_CACHE_SECONDS` (5 s) per caller's
    scope; `generated_at` says when it was read."""
    return OverviewOut.model_validate(await state.overview.read(principal))
