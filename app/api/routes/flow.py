"""A job's concurrency key as it stands (docs/flow-control.md): how many of the key's jobs run and how many wait
for a slot. The dashboard's job page shows it."""

from fastapi import APIRouter
from pydantic import BaseModel

from app.api.deps import PrincipalDep, StateDep
from app.api.errors import ApiError, not_found
from app.services.flow import key_counts

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])


class KeyStateOut(BaseModel):
    """One client's concurrency key: its limit (the job's), its jobs running (or granted a slot) and waiting."""

    key: str
    limit: int
    running: int
    waiting: int


@router.get(
    "/{job_id}/concurrency",
    response_model=KeyStateOut,
    responses={404: {"description": "No such job for this client, or the job has no concurrency key."}},
)
async def job_concurrency(job_id: str, state: StateDep, principal: PrincipalDep) -> KeyStateOut:
    """The job's concurrency key now: its jobs running and waiting for a slot."""
    job = await state.jobs.get(principal, job_id)
    if job is None:
        raise not_found("job")
    key, limit = job["concurrency_key"], job["concurrency_limit"]
    if key is None or limit is None:
        raise ApiError(404, "not_found", "The job has no concurrency key.")
    counts = await key_counts(state.resources.stores.flow, job["client_id"], key)
    return KeyStateOut(key=key, limit=limit, running=counts.running, waiting=counts.waiting)
