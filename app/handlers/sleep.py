"""`sleep`: waits, then says how long."""

import asyncio

from pydantic import BaseModel, Field

from app.handlers.base import JobContext, JobType
from app.schemas.requests import REQUEST_CONFIG


class SleepPayload(BaseModel):
    model_config = REQUEST_CONFIG

    seconds: float = Field(ge=0, le=600, description="How long to sleep, at most 600 s.")


async def handle(ctx: JobContext, payload: SleepPayload) -> dict[str, float]:
    await asyncio.sleep(payload.seconds)
    return {"slept": payload.seconds}


JOB_TYPE = JobType("sleep", SleepPayload, handle, "Sleeps for `seconds`; handy for testing timeouts and crashes.")
