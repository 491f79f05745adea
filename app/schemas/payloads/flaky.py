"""`flaky`'s payload: how many runs fail, and how."""

from pydantic import BaseModel, Field

from app.schemas.payloads.base import PayloadSpec
from app.schemas.requests import REQUEST_CONFIG, WholeNumber


class FlakyPayload(BaseModel):
    model_config = REQUEST_CONFIG

    fail_times: WholeNumber = Field(
        default=1, ge=0, le=100, description="Fail while the job has run this many times or fewer."
    )
    permanent: bool = Field(default=False, description="Fail with a permanent error instead of a transient one.")


SPEC = PayloadSpec("flaky", FlakyPayload, "Fails its first `fail_times` runs, then succeeds.")
