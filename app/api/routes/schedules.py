"""Recurring schedules: create, list, read, change (pause with `active: false`), delete, trigger one run now."""

from typing import Any

from fastapi import APIRouter, Response

from app.api.admission import rate_limit, urls_safe
from app.api.deps import PAGE_SIZE, CursorQuery, LimitQuery, PrincipalDep, StateDep
from app.api.errors import invalid, not_found
from app.api.routes.jobs import SUBMIT_STATUS
from app.core.cron import BadCron, BadTimezone
from app.schemas.job import JobOut
from app.schemas.schedule import ScheduleCreate, ScheduleOut, SchedulePage, ScheduleUpdate

router = APIRouter(prefix="/api/v1/schedules", tags=["schedules"])
INVALID: dict[int | str, dict[str, Any]] = {
    422: {"description": "A bad cron expression or time zone, or a job request that is not valid."}
}
MISSING: dict[int | str, dict[str, Any]] = {404: {"description": "No such schedule for this client."}}


def _job(request: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = request.model_dump(mode="json", exclude_unset=True)
    return dumped


@router.post("", status_code=201, response_model=ScheduleOut, responses=INVALID)
async def create_schedule(body: ScheduleCreate, state: StateDep, principal: PrincipalDep) -> ScheduleOut:
    """Save a schedule; each firing submits `job` under the idempotency key `schedule:<id>:<fire time>`."""
    fields = {**body.model_dump(exclude={"job"}), "job": _job(body.job)}
    await urls_safe(state, [body.job])  # the URLs its jobs will call: checked now as at a submit
    return ScheduleOut.model_validate(await state.schedules.create(principal, fields))


@router.get("", response_model=SchedulePage)
async def list_schedules(
    state: StateDep,
    principal: PrincipalDep,
    limit: LimitQuery = PAGE_SIZE,
    cursor: CursorQuery = None,
) -> SchedulePage:
    """The caller's schedules, newest first, a page at a time."""
    rows, next_cursor = await state.schedules.page(principal, limit, cursor)
    return SchedulePage(items=[ScheduleOut.model_validate(r) for r in rows], next_cursor=next_cursor)


@router.get("/{schedule_id}", response_model=ScheduleOut, responses=MISSING)
async def get_schedule(schedule_id: str, state: StateDep, principal: PrincipalDep) -> ScheduleOut:
    row = await state.schedules.get(principal, schedule_id)
    if row is None:
        raise not_found("schedule")
    return ScheduleOut.model_validate(row)


@router.patch("/{schedule_id}", response_model=ScheduleOut, responses={**INVALID, **MISSING})
async def update_schedule(
    schedule_id: str, body: ScheduleUpdate, state: StateDep, principal: PrincipalDep
) -> ScheduleOut:
    """Change any field; `active: false` pauses it (no firing), `active: true` resumes it from now on (the
    periods it was paused are not made up)."""
    changes = body.model_dump(exclude_unset=True, exclude={"job"})
    if body.job is not None:
        changes["job"] = _job(body.job)
        await urls_safe(state, [body.job])
    try:
        row = await state.schedules.update(principal, schedule_id, changes)
    except (BadCron, BadTimezone) as exc:  # a schedule saved before its cron or zone was checked as now
        field = "cron" if isinstance(exc, BadCron) else "timezone"
        raise invalid([{"type": "value_error", "loc": ["body", field], "msg": str(exc)}]) from exc
    if row is None:
        raise not_found("schedule")
    return ScheduleOut.model_validate(row)


@router.delete("/{schedule_id}", status_code=204, responses=MISSING)
async def delete_schedule(schedule_id: str, state: StateDep, principal: PrincipalDep) -> Response:
    """No further firing; the jobs it made stay."""
    if not await state.schedules.delete(principal, schedule_id):
        raise not_found("schedule")
    return Response(status_code=204)


@router.post(
    "/{schedule_id}/trigger",
    status_code=201,
    response_model=JobOut,
    responses={
        **MISSING,
        200: {"model": JobOut, "description": "Triggered already within this second: that job."},
        202: {"model": JobOut, "description": "Saved as `pending`; published once the broker is back."},
        429: {"description": "Over the schedule's client's rate limit (a trigger counts like a submit)."},
    },
)
async def trigger_schedule(schedule_id: str, response: Response, state: StateDep, principal: PrincipalDep) -> JobOut:
    """One run now, besides the cron's: the job it submits, answered as a submit is (and counted as one)."""
    if (schedule := await state.schedules.get(principal, schedule_id)) is None:
        raise not_found("schedule")
    await rate_limit(state, schedule["client_id"], response)
    placed = await state.schedules.trigger(principal, schedule_id)
    if placed is None:
        raise not_found("schedule")
    job, outcome = placed
    response.status_code = SUBMIT_STATUS[outcome]
    return JobOut.model_validate(job)
