"""`echo`: returns its payload."""

from typing import Any

from pydantic import RootModel

from app.handlers.base import JobContext, JobType


class EchoPayload(RootModel[Any]):
    """Any JSON value."""


async def handle(ctx: JobContext, payload: EchoPayload) -> Any:
    return payload.root


JOB_TYPE = JobType("echo", EchoPayload, handle, "Returns its payload as the result.")
