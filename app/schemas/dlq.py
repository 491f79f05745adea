"""The dead-letter queue as clients see it."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, JsonValue
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


GROUP_ID = r"^[0-9a-f]{16}$"


class ReplayIn(BaseModel):
    model_config = REQUEST_CONFIG

    job_ids: list[str] | None = Field(default=None, max_length=1000)
    job_type: str | None = None
    group: str | None = Field(
        default=None, pattern=GROUP_ID, description="A failure group's id (`GET /api/v1/dlq/groups`): its jobs only."
    )
    limit: WholeNumber = Field(default=100, ge=1, le=1000)


class ReplayOneIn(BaseModel):
    model_config = REQUEST_CONFIG

    payload: dict[str, JsonValue] | None = Field(
        default=None,
        description="The job's new payload, checked by its job type's model as a submit is; a value left as the "
        "job shows it (`***` where a credential stood) keeps what it stood for. Absent: replayed as it is.",
    )


class GroupExample(BaseModel):
    job_id: str = Field(description="One of the group's jobs.")
    error: dict[str, Any] | None = Field(description="Its last error, as the job shows it.")
    reason: DeadReason | None
    attempts: int


class FailureGroupOut(BaseModel):
    id: str | None = Field(
        description="16 hex digits of the job type, error class and masked message; null for jobs that died "
        "before failure groups were recorded and were not given one (one such group per job type)."
    )
    job_type: str
    error_class: str = Field(description="The error's `type` as the worker recorded it (`Error` when it named none).")
    message: str = Field(description="The example's error message, its ids, numbers, times and quoted values masked.")
    count: int = Field(description="Dead jobs in the group (the caller's; an admin's: every client's).")
    first_seen: datetime | None = Field(description="When the group's first job died.")
    last_seen: datetime | None = Field(description="When its last job died.")
    example: GroupExample


class FailureGroupPage(Page[FailureGroupOut]):
    pass


class ReplayOut(BaseModel):
    replayed: int
    job_ids: list[str]
