"""Job requests and responses as clients see them."""

import functools
import operator
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, create_model, field_validator, model_validator

from app.core.statuses import JobStatus
from app.schemas.flow import Concurrency, RateLimit, shown
from app.schemas.page import Page
from app.schemas.payloads.base import PayloadSpec
from app.schemas.payloads.registry import PAYLOADS
from app.schemas.requests import REQUEST_CONFIG, RequestTime, WholeNumber
from app.schemas.unique import Unique, shown_unique

MAX_TIMEOUT_SECONDS = 1500  # below RabbitMQ's 30-minute consumer timeout
MAX_DELAY_SECONDS = 365 * 24 * 3600  # a year
MAX_DELAY = timedelta(seconds=MAX_DELAY_SECONDS)
# The earliest run_at taken: anything before is a mistake, and the calendar's edges (year 1, year 9999) are times
# the database and the scheduler cannot carry (PostgreSQL stores a year-1 time with an offset as -infinity).
EARLIEST_RUN_AT = datetime(2000, 1, 1, tzinfo=UTC)


class JobOptions(BaseModel):
    """Everything a submit may say besides the type and payload."""

    model_config = REQUEST_CONFIG

    priority: WholeNumber = Field(default=5, ge=1, le=10, description="1 is most urgent, 10 least.")
    max_retries: WholeNumber = Field(default=3, ge=0, le=10, description="Retries after the first attempt.")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=255)
    callback_url: str | None = Field(default=None, max_length=2048, pattern=r"^https?://")
    timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_SECONDS)
    run_at: RequestTime | None = Field(
        default=None,
        description="When to run it (ISO 8601 with an offset), from 2000-01-01T00:00:00Z to a year from now; "
        "a time in the past runs now.",
    )
    delay_seconds: float | None = Field(
        default=None, gt=0, le=MAX_DELAY_SECONDS, allow_inf_nan=False, description="Run it this many seconds from now."
    )
    concurrency: Concurrency | None = Field(default=None, description="A concurrency key and its limit.")
    rate_limit: RateLimit | None = Field(default=None, description="A rate key: starts per period.")
    unique: Unique | None = Field(
        default=None, description="While the client's job with this key holds it, a submit answers 200 with that job."
    )
    # Each job type's request model narrows these two: job_type to its name, payload to its model.
    job_type: str
    payload: Any

    @field_validator("run_at")
    @classmethod
    def _within_bounds(cls, run_at: datetime | None) -> datetime | None:
        # Aware times compare by the instant they name, whatever their offsets, without leaving the calendar.
        if run_at is not None and not EARLIEST_RUN_AT <= run_at <= datetime.now(UTC) + MAX_DELAY:
            raise ValueError("give a time from 2000-01-01T00:00:00Z to a year from now (as delay_seconds)")
        return run_at

    @model_validator(mode="after")
    def _one_time_at_most(self) -> "JobOptions":
        if self.run_at is not None and self.delay_seconds is not None:
            raise ValueError("give run_at or delay_seconds, not both")
        return self


def _request_model(spec: PayloadSpec) -> type[JobOptions]:
    tag: Any = Literal[spec.name]
    return create_model(
        f"{spec.name.title()}JobRequest",
        __base__=JobOptions,
        __doc__=spec.description,
        job_type=(tag, ...),
        payload=(spec.model, ...),
    )


REQUEST_MODELS = tuple(_request_model(spec) for spec in PAYLOADS.values())

_ANY_REQUEST: Any = Annotated[functools.reduce(operator.or_, REQUEST_MODELS), Field(discriminator="job_type")]

# The body of POST /jobs: a union discriminated by job_type, so each type shows its own payload in OpenAPI.
JOB_REQUEST: TypeAdapter[JobOptions] = TypeAdapter(_ANY_REQUEST)
JobRequest: Any = _ANY_REQUEST  # the same union, as a field's type (a schedule's job)

# Shown with JobRequest in OpenAPI; tests/api/test_openapi.py checks each against the schema.
JOB_REQUEST_EXAMPLES: list[dict[str, Any]] = [
    {"job_type": "echo", "payload": {"any": "json"}, "priority": 5, "max_retries": 3, "idempotency_key": "order-123"},
    {"job_type": "document", "payload": {"template": "invoice", "pages": 3}},
    {"job_type": "sleep", "payload": {"seconds": 0.5}, "timeout_seconds": 60},
    {
        "job_type": "echo",
        "payload": {"export": "customer-7"},
        "concurrency": {"key": "export:customer-7", "limit": 2},
        "rate_limit": {"key": "partner-api", "limit": 10, "period_seconds": 1},
    },
    {"job_type": "echo", "payload": {"sync": "user-42"}, "unique": {"key": "sync-user-42", "for_seconds": 300}},
]


# A job as OpenAPI shows it; added after FastAPI writes the document, which would drop its nulls.
JOB_OUT_EXAMPLE: dict[str, Any] = {
    "id": "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0",
    "client_id": "acme",
    "job_type": "echo",
    "status": "succeeded",
    "priority": 5,
    "attempts": 1,
    "max_retries": 3,
    "payload": {"any": "json"},
    "result": {"any": "json"},
    "error": None,
    "idempotency_key": "order-123",
    "callback_url": None,
    "request_id": "4b1c5555873746d98cd71ca0d1876c4e",
    "created_at": "2026-04-05T04:13:31.060974Z",
    "updated_at": "2026-04-05T04:13:31.210000Z",
    "started_at": "2026-04-05T04:13:31.120000Z",
    "finished_at": "2026-04-05T04:13:31.200000Z",
    "concurrency": None,
    "rate_limit": None,
    "unique": None,
    "workflow_id": None,
    "ref": None,
    "depends_on": None,
    "progress": None,
}


class JobProgress(BaseModel):
    """What a running job's handler last reported (stored at most once a second, and its last report)."""

    fraction: float = Field(ge=0, le=1, description="How far the run is, from 0 to 1.")
    message: str | None = Field(default=None, description="The handler's short word on it, if any.")
    updated_at: datetime = Field(description="When the handler reported it.")


class JobOut(BaseModel):
    """A job, as every endpoint returns it."""

    id: str
    client_id: str
    job_type: str
    status: JobStatus
    priority: int
    attempts: int
    max_retries: int
    payload: Any
    result: Any | None
    error: dict[str, Any] | None
    idempotency_key: str | None
    callback_url: str | None
    request_id: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    run_at: datetime | None = Field(default=None, description="When a job submitted with a time is due.")
    concurrency: Concurrency | None = Field(default=None, description="As submitted; null when none.")
    rate_limit: RateLimit | None = Field(default=None, description="As submitted; null when none.")
    unique: Unique | None = Field(default=None, description="As submitted; null when none.")
    workflow_id: str | None = Field(default=None, description="The workflow it belongs to; null when none.")
    ref: str | None = Field(default=None, description="Its name in its workflow.")
    depends_on: list[str] | None = Field(
        default=None, description="The ids of the jobs of its workflow it waits for; null outside a workflow."
    )
    cancel_requested: bool = Field(
        default=False,
        description="Its cancel was asked for while it ran: its handler is being stopped, and it ends `cancelled` "
        "unless it finished first.",
    )

    progress: JobProgress | None = Field(
        default=None, description="What its handler last reported of its run; null when it reported nothing."
    )

    @model_validator(mode="before")
    @classmethod
    def _flow(cls, data: Any) -> Any:
        """A job row's flow-control and unique-job columns as the objects a client sent, and its cancel request as a
        flag."""
        if isinstance(data, dict) and "concurrency" not in data:
            unique, asked = shown_unique(data), data.get("cancel_requested_at") is not None
            return {**data, **shown(data), "unique": unique, "cancel_requested": asked}
        return data


class JobPage(Page[JobOut]):
    pass


class JobEventOut(BaseModel):
    """One row of the audit trail."""

    event: str
    detail: dict[str, Any]
    created_at: datetime


MAX_BATCH_JOBS = 500


class Submitted(StrEnum):
    """How far a submitted job got."""

    CREATED = "created"  # saved and confirmed by the broker
    PENDING = "pending"  # saved; the relay publishes it once the broker confirms
    EXISTING = "existing"  # the same request under the same idempotency key, or a unique key held: nothing new


class BatchItemOut(BaseModel):
    """One job of a batch, in the place its request had."""

    outcome: Submitted = Field(
        description="`created`: saved and confirmed by the broker; `pending`: saved, published once the broker is "
        "back (as a single submit's 202); `existing`: an earlier job with this idempotency key and request, or "
        "the job holding this unique key (as a single submit's 200)."
    )
    job: JobOut


class BatchOut(BaseModel):
    """The answer to a batch: every job, in request order."""

    items: list[BatchItemOut]


# The body of POST /jobs/batch as OpenAPI shows it; items are validated one by one (each error names its index).
BATCH_REQUEST_SCHEMA: dict[str, Any] = {
    "title": "BatchRequest",
    "type": "object",
    "additionalProperties": False,
    "required": ["jobs"],
    "properties": {
        "jobs": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_BATCH_JOBS,
            "items": {"$ref": "#/components/schemas/JobRequest"},
            "description": "Each item as the body of POST /api/v1/jobs, with its own `idempotency_key`.",
        }
    },
}


class BatchEnvelope(BaseModel):
    """The batch around its items; each item is checked on its own against JobRequest."""

    model_config = REQUEST_CONFIG

    jobs: list[Any] = Field(min_length=1, max_length=MAX_BATCH_JOBS)
