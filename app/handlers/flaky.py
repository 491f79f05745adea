"""`flaky`: fails on purpose for its first runs, to exercise retries and the dead-letter queue."""

from app.handlers.base import JobContext, JobType
from app.handlers.errors import PermanentError, TransientError
from app.schemas.payloads.flaky import SPEC, FlakyPayload


async def handle(ctx: JobContext, payload: FlakyPayload) -> dict[str, int]:
    # Runs count over the job's whole life, replays included.
    if ctx.runs <= payload.fail_times:
        error = PermanentError if payload.permanent else TransientError
        raise error(f"flaky failure on run {ctx.runs} of {payload.fail_times}")
    return {"attempts": ctx.runs}


JOB_TYPE = JobType(SPEC, handle)
