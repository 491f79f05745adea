"""Job types: each with its description, paused or not, and its jobs waiting or running; pausing and resuming one
(docs/flow-control.md)."""

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter

from app.api.deps import AdminDep, PrincipalDep, StateDep
from app.api.errors import ApiError
from app.schemas.job_type import JobTypeOut, JobTypesOut
from app.services.job_types import JobTypeState, UnknownJobType

router = APIRouter(prefix="/api/v1/job-types", tags=["operations"])

STEERED: dict[int | str, dict[str, Any]] = {
    403: {"description": "The key is not an admin key."},
    404: {"description": "No job type of that name."},
}


def _out(state: JobTypeState) -> JobTypeOut:
    return JobTypeOut.model_validate(asdict(state))


def _unknown() -> ApiError:
    return ApiError(404, "not_found", "No job type with that name; GET /api/v1/job-types lists them.")


@router.get("", response_model=JobTypesOut)
async def list_job_types(state: StateDep, principal: PrincipalDep) -> JobTypesOut:
    """Every job type, by name (the built-in ones and the installed plugins', docs/plugins.md): its description, its
    payload's JSON Schema, whether it is paused, and how many of your jobs of it wait (`queued`) or run (`running`);
    an admin's counts are every client's."""
    return JobTypesOut(items=[_out(one) for one in await state.job_types.states(principal)])


@router.post("/{job_type}/pause", status_code=202, response_model=JobTypeOut, responses=STEERED)
async def pause_job_type(job_type: str, state: StateDep, principal: AdminDep) -> JobTypeOut:
    """Pause a job type in every process: within a few seconds no new job of it starts (running ones finish); its
    jobs stay `queued`, nothing is lost, and the pause outlives restarts until the type is resumed."""
    try:
        return _out(await state.job_types.pause(principal, job_type))
    except UnknownJobType as exc:
        raise _unknown() from exc


@router.post("/{job_type}/resume", status_code=202, response_model=JobTypeOut, responses=STEERED)
async def resume_job_type(job_type: str, state: StateDep, principal: AdminDep) -> JobTypeOut:
    """Resume a paused job type: its waiting jobs are sent back to their lanes and run as workers take them, in
    the order they were submitted. Resuming a type that is not paused changes nothing."""
    try:
        return _out(await state.job_types.resume(principal, job_type))
    except UnknownJobType as exc:
        raise _unknown() from exc
