"""`sleep`'s payload: how long to wait."""

from pydantic import BaseModel, Field

from app.schemas.payloads.base import PayloadSpec
from app.schemas.requests import REQUEST_CONFIG


class SleepPayload(BaseModel):
    model_config = REQUEST_CONFIG | {
        "json_schema_extra": {"examples": [{"seconds": 5}, {"seconds": 30, "progress": True}]}
    }

    seconds: float = Field(ge=0, le=600, description="How long to sleep, at most 600 s.")
    progress: bool = Field(default=False, description="Report progress (elapsed / seconds) about every 0.5 s.")


SPEC = PayloadSpec("sleep", SleepPayload, "Sleeps for `seconds`; handy for testing timeouts and crashes.")
