"""`sleep`: waits, then says how long; with `progress`, reports how far it is about every 0.5 s."""

import asyncio

from app.handlers.base import JobContext, JobType
from app.schemas.payloads.sleep import SPEC, SleepPayload

REPORT_EVERY_SECONDS = 0.5


async def handle(ctx: JobContext, payload: SleepPayload) -> dict[str, float]:
    if payload.progress and payload.seconds > 0:
        await _sleep_reporting(ctx, payload.seconds, REPORT_EVERY_SECONDS)
    else:
        await asyncio.sleep(payload.seconds)
    return {"slept": payload.seconds}


async def _sleep_reporting(ctx: JobContext, seconds: float, every: float) -> None:
    """Sleep `seconds`, reporting elapsed / seconds after each `every` and at the end."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while (left := started + seconds - loop.time()) > 0:
        await asyncio.sleep(min(every, left))
        await ctx.progress(min(1.0, (loop.time() - started) / seconds))


JOB_TYPE = JobType(SPEC, handle)
