"""Recurring schedules as clients see them."""

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from app.core.cron import check, zone
from app.schemas.job import JobOptions, JobRequest
from app.schemas.page import Page
from app.schemas.requests import REQUEST_CONFIG

# A firing sets the job's time and key itself.
NOT_IN_A_SCHEDULE = ("run_at", "delay_seconds", "idempotency_key")
CRON_RULES: dict[str, Any] = {
    "max_length": 255,
    "description": "Five fields (minute hour day month weekday), or six with seconds last; one that never fires "
    "(the 31st of February) is refused.",
    "examples": ["0 3 * * *"],
}
TIMEZONE_RULES: dict[str, Any] = {
    "max_length": 64,
    "description": "An IANA time zone name (`Europe/Lisbon`), not a folder of them (`Europe`).",
    "examples": ["UTC"],
}


def _cron(value: str | None) -> str | None:
    return None if value is None else check(value)


def _timezone(value: str | None) -> str | None:
    if value is not None:
        zone(value)
    return value


def _plain_job(job: JobOptions | None) -> JobOptions | None:
    given = [name for name in NOT_IN_A_SCHEDULE if job is not None and getattr(job, name) is not None]
    if given:
        raise ValueError(f"a schedule's job takes no {', '.join(given)}: each firing sets the time and the key")
    return job


class ScheduleCreate(BaseModel):
    model_config = REQUEST_CONFIG

    name: str = Field(min_length=1, max_length=200)
    cron: str = Field(**CRON_RULES)
    timezone: str = Field(default="UTC", **TIMEZONE_RULES)
    job: JobRequest = Field(description="The job each firing submits, as the body of POST /api/v1/jobs.")
    active: bool = True

    _check_cron = field_validator("cron")(_cron)
    _check_timezone = field_validator("timezone")(_timezone)
    _check_job = field_validator("job")(_plain_job)


class ScheduleUpdate(BaseModel):
    """The fields to change; a field left out keeps its value, and none may be null."""

    model_config = REQUEST_CONFIG

    name: Annotated[str, Field(min_length=1, max_length=200)] | SkipJsonSchema[None] = None
    cron: Annotated[str, Field(**CRON_RULES)] | SkipJsonSchema[None] = None
    timezone: Annotated[str, Field(**TIMEZONE_RULES)] | SkipJsonSchema[None] = None
    job: JobRequest | SkipJsonSchema[None] = None
    active: bool | SkipJsonSchema[None] = None

    _check_cron = field_validator("cron")(_cron)
    _check_timezone = field_validator("timezone")(_timezone)
    _check_job = field_validator("job")(_plain_job)

    @model_validator(mode="after")
    def _no_nulls(self) -> "ScheduleUpdate":
        nulls = [name for name in self.model_fields_set if getattr(self, name) is None]
        if nulls:
            raise ValueError(f"{', '.join(nulls)} cannot be null; leave a field out to keep it")
        return self


class ScheduleOut(BaseModel):
    """A schedule; `next_run_at` is null while it is paused (`active: false`)."""

    id: str
    client_id: str
    name: str
    cron: str
    timezone: str
    job: dict[str, Any]
    active: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    created_at: datetime
    updated_at: datetime


class SchedulePage(Page[ScheduleOut]):
    pass
