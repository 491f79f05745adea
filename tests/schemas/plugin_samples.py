"""Job types as plugins register them, for tests/schemas/test_plugins.py: a good one, a clash, a bad name."""

from pydantic import BaseModel

from app.handlers.base import JobContext, JobType
from app.handlers.echo import JOB_TYPE as ECHO
from app.schemas.payloads.base import PayloadSpec


class Shout(BaseModel):
    text: str


async def shout(ctx: JobContext, payload: Shout) -> str:
    return payload.text.upper()


JOB_TYPE = JobType(PayloadSpec("shout", Shout, "Shouts."), shout)
WHISPER = JobType(PayloadSpec("whisper", Shout, "Whispers."), shout)
PAIR = [JOB_TYPE, WHISPER]
CLASH = JobType(PayloadSpec(ECHO.name, Shout, "Another echo."), shout)
DOTTED = JobType(PayloadSpec("shout.loud", Shout, "A name events cannot route."), shout)
NOT_A_TYPE = "shout"
