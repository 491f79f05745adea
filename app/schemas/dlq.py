"""The dead-letter queue as clients see it."""

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from app.core.statuses import DeadReason
from app.schemas.job import JobOut
from app.schemas.page import Page
from app.schemas.requests import REQUEST_CONFIG, WholeNumber

# The reasons a job (rather than a webhook delivery) dies with.
JOB_REASONS = [r for r in DeadReason if r is not DeadReason.GONE]


class DeadJobOut(JobOut):
    reason: DeadReason | None = Field(description=f"{', '.join(JOB_REASONS[:-1])} or {JOB_REASONS[-1]}.")


class DeadJobPage(Page[DeadJobOut]):
    pass


class DlqStats(BaseModel):
    dead_lettered: int
    by_job_type: dict[str, int]
    by_reason: dict[str, int]
    # Absent, not null, for a non-admin: the route drops None fields, and the schema shows a plain integer.
    broker_depth: int | SkipJsonSchema[None] = Field(
        default=None,
        description="Messages in the broker's DLQ: only in an admin's answer, and only while the broker can tell.",
    )


class ReplayIn(BaseModel):
    model_config = REQUEST_CONFIG

    job_ids: list[str] | None = Field(default=None, max_length=1000)
    job_type: str | None = None
    limit: WholeNumber = Field(default=100, ge=1, le=1000)


class ReplayOut(BaseModel):
    replayed: int
    job_ids: list[str]
