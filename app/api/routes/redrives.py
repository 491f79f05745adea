"""Throttled redrives: dead jobs or failed deliveries sent again, at most R a second, pausable, resumable, and
their pace changed while they run."""

from collections.abc import Awaitable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from app.api.deps import PAGE_SIZE, CursorQuery, LimitQuery, PrincipalDep, StateDep
from app.api.errors import ApiError, not_found
from app.core.statuses import RedriveStatus
from app.schemas.redrive import RedriveIn, RedriveOut, RedrivePace, RedrivePage
from app.services.redrives import NotAllowed, answer
from app.stores.redrives import Row

router = APIRouter(prefix="/api/v1/dlq/redrives", tags=["dead-letter queue"])
Action = Literal["pause", "resume", "cancel"]


@router.post("", status_code=201, response_model=RedriveOut, summary="Start a throttled redrive")
async def start_redrive(body: RedriveIn, state: StateDep, principal: PrincipalDep) -> RedriveOut:
    """Send dead jobs (`kind: jobs`, by `group`, `job_type` or `job_ids`) or failed deliveries (`kind:
    deliveries`, by `webhook_id` or `event_type`) again, oldest failure first, at most `per_second` a second and
    `limit` in all. The items are taken now; each is sent once, even across a restart."""
    return RedriveOut.model_validate(answer(await state.redrives.start(principal, body)))


@router.get("", response_model=RedrivePage, summary="List redrives")
async def list_redrives(
    state: StateDep,
    principal: PrincipalDep,
    status: Annotated[RedriveStatus | None, Query()] = None,
    limit: LimitQuery = PAGE_SIZE,
    cursor: CursorQuery = None,
) -> RedrivePage:
    """Your redrives (an admin's key: every redrive), newest first, each with its progress and history."""
    rows, after = await state.redrives.page(principal, status, limit, cursor)
    return RedrivePage(items=[RedriveOut.model_validate(answer(row)) for row in rows], next_cursor=after)


@router.get("/{redrive_id}", response_model=RedriveOut, summary="One redrive")
async def get_redrive(redrive_id: str, state: StateDep, principal: PrincipalDep) -> RedriveOut:
    """The redrive's progress (`replayed` and `skipped` of `total`), status and history."""
    return _answered(await state.redrives.one(principal, redrive_id))


async def _act(redrive_id: str, action: Action, state: StateDep, principal: PrincipalDep) -> RedriveOut:
    return _answered(await _refused_as_409(action, state.redrives.act(principal, redrive_id, action)))


async def _refused_as_409(action: str, acting: Awaitable[Row | None]) -> Row | None:
    try:
        return await acting
    except NotAllowed as refused:
        detail = f"A {refused.status} redrive cannot be {ACTED[action]}; see its status and history."
        raise ApiError(409, "not_allowed", detail, redrive_status=refused.status) from None


def _answered(row: Row | None) -> RedriveOut:
    if row is None:
        raise not_found("redrive")
    return RedriveOut.model_validate(answer(row))


ACTED = {
    "pause": "paused (only a running one can)",
    "resume": "resumed (only a paused one can)",
    "cancel": "cancelled (it has ended)",
    "retime": "given a new pace (it has ended)",
}


NOT_ALLOWED: dict[int | str, dict[str, Any]] = {
    409: {"description": "Its status does not allow it (`not_allowed`, with `redrive_status`)."}
}


@router.post("/{redrive_id}/pause", response_model=RedriveOut, summary="Pause a redrive", responses=NOT_ALLOWED)
async def pause_redrive(redrive_id: str, state: StateDep, principal: PrincipalDep) -> RedriveOut:
    """Stop sending its items (within a second or two); `resume` carries on where it stopped."""
    return await _act(redrive_id, "pause", state, principal)


@router.post(
    "/{redrive_id}/resume", response_model=RedriveOut, summary="Resume a paused redrive", responses=NOT_ALLOWED
)
async def resume_redrive(redrive_id: str, state: StateDep, principal: PrincipalDep) -> RedriveOut:
    """Carry on sending its items, from where it stopped, at its pace."""
    return await _act(redrive_id, "resume", state, principal)


@router.post("/{redrive_id}/cancel", response_model=RedriveOut, summary="Cancel a redrive", responses=NOT_ALLOWED)
async def cancel_redrive(redrive_id: str, state: StateDep, principal: PrincipalDep) -> RedriveOut:
    """End it for good; the items it sent stay sent, the rest are left as they are."""
    return await _act(redrive_id, "cancel", state, principal)


@router.patch("/{redrive_id}", response_model=RedriveOut, summary="Change a redrive's pace", responses=NOT_ALLOWED)
async def retime_redrive(redrive_id: str, body: RedrivePace, state: StateDep, principal: PrincipalDep) -> RedriveOut:
    """A new `per_second` for a running or paused redrive, in force within a second; its history gains a
    `rate_changed` row. An ended redrive answers 409."""
    return _answered(await _refused_as_409("retime", state.redrives.retime(principal, redrive_id, body.per_second)))
