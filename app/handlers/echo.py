"""`echo`: returns its payload."""

from typing import Any

from app.handlers.base import JobContext, JobType
from app.schemas.payloads.echo import SPEC, EchoPayload


async def handle(ctx: JobContext, payload: EchoPayload) -> Any:
    return payload.root


JOB_TYPE = JobType(SPEC, handle)
