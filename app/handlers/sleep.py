"""`sleep`: waits, then says how long."""

import asyncio

from app.handlers.base import JobContext, JobType
from app.schemas.payloads.sleep import SPEC, SleepPayload


async def handle(ctx: JobContext, payload: SleepPayload) -> dict[str, float]:
    await asyncio.sleep(payload.seconds)
    return {"slept": payload.seconds}


JOB_TYPE = JobType(SPEC, handle)
