"""One action on many jobs (`POST /api/v1/jobs/bulk`): what to do, to which jobs, and what became of each."""

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, Field

from app.core.statuses import JobStatus
from app.schemas.requests import REQUEST_CONFIG

MAX_BULK_JOBS = 500


class BulkAction(StrEnum):
    CANCEL = "cancel"  # as POST /api/v1/jobs/{id}/cancel
    RETRY = "retry"  # as POST /api/v1/jobs/{id}/retry: a dead-lettered job is replayed


class BulkOutcome(StrEnum):
    CANCELLED = "cancelled"  # it had not started: cancelled at once
    CANCEL_REQUESTED = "cancel_requested"  # it was running: its handler is being stopped
    REPLAYED = "replayed"  # it was dead-lettered: sent back to work
    NOT_FOUND = "not_found"  # no such job for this caller
    CONFLICT = "conflict"  # its status does not allow the action (finished, or not dead-lettered)


class BulkIn(BaseModel):
    model_config = REQUEST_CONFIG

    action: BulkAction = Field(strict=False, description="`cancel` or `retry` (which replays a dead-lettered job).")
    job_ids: list[Annotated[str, Field(min_length=1, max_length=64)]] = Field(
        min_length=1,
        max_length=MAX_BULK_JOBS,
        description=f"1-{MAX_BULK_JOBS} job ids; a repeated id is acted on once.",
    )


class BulkItemOut(BaseModel):
    job_id: str
    outcome: BulkOutcome
    status: JobStatus | None = Field(
        default=None, description="The job's status after the action; null when the job was not found."
    )


class BulkOut(BaseModel):
    """Each distinct id, in the order first given, with what became of it."""

    items: list[BulkItemOut]
