"""`flaky`: fails on purpose for its first runs, to exercise retries and the dead-letter queue."""

from pydantic import BaseModel, Field

from app.handlers.base import JobContext, JobType
from app.handlers.errors import PermanentError, TransientError
from app.schemas.requests import REQUEST_CONFIG, WholeNumber


class FlakyPayload(BaseModel):
    model_config = REQUEST_CONFIG

    fail_times: WholeNumber = Field(
        default=1, ge=0, le=100, description="Fail while the job has run this many times or fewer."
    )
    permanent: bool = Field(default=False, description="Fail with a permanent error instead of a transient one.")


async def handle(ctx: JobContext, payload: FlakyPayload) -> dict[str, int]:
    # Runs count over the job's whole life, replays included.
    if ctx.runs <= payload.fail_times:
        error = PermanentError if payload.permanent else TransientError
        raise error(f"flaky failure on run {ctx.runs} of {payload.fail_times}")
    return {"attempts": ctx.runs}


JOB_TYPE = JobType("flaky", FlakyPayload, handle, "Fails its first `fail_times` runs, then succeeds.")
