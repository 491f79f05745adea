"""Rows as the code passes them around: typed, so a wrong key is a type error, not a KeyError at run time.

Statuses and reasons are typed with the enums of core/statuses.py; as read from the database they are the plain
text each member equals (StrEnum), so either compares, hashes and serializes the same."""

from datetime import datetime
from typing import Any, TypedDict, cast

from app.core.statuses import DeadReason, DeliveryStatus, JobStatus


class JobRow(TypedDict):
    """A `jobs` row: the job as stored, every column."""

    id: str
    client_id: str
    job_type: str
    status: JobStatus
    priority: int
    max_retries: int
    timeout_seconds: float | None
    attempts: int  # runs in the current retry budget
    runs: int  # every run ever: the fencing token
    seq: int  # status changes so far: the compare-and-set guard and the event's ordering
    payload: Any  # as clients see it: a credential written `***`
    sealed: str | None  # the payload's credentials, sealed (services/payload_secrets.py)
    result: Any
    error: dict[str, Any] | None
    dead_reason: DeadReason | None
    idempotency_key: str | None
    request_hash: str | None
    callback_url: str | None
    request_id: str | None
    lease_until: datetime | None
    next_attempt_at: datetime | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    run_at: datetime | None
    held: str | None  # why it waits in the database (HeldReason), or None: it may run
    concurrency_key: str | None  # flow control: at most concurrency_limit of the client's jobs with it run at once
    concurrency_limit: int | None
    rate_key: str | None  # at most rate_starts of the client's jobs with it start in any rate_period seconds
    rate_starts: int | None
    rate_period: float | None
    granted_run: int | None  # the run a keyed job was admitted for (runs + 1 when granted)
    granted_at: datetime | None
    held_until: datetime | None  # a job held for its rate window: when the window may let it start
    workflow_id: str | None  # its workflow (docs/workflows.md), or None
    ref: str | None  # its name in its workflow
    depends_on: list[str] | None  # the ids of the jobs it waits for ([] in a workflow, None outside one)
    deps_left: int | None  # how many of those have not yet let it go
    unique_key: str | None  # its unique key as submitted (docs/job-types.md), or None
    unique_seconds: int | None  # how long after its creation it holds the key, finished or not
    unique_live: str | None  # the unique key while this job holds it; None once released
    progress: dict[str, Any] | None  # the handler's last report: fraction, message, updated_at
    cancel_requested_at: datetime | None  # a cancel asked for while it ran (its worker stops it), or None
    failure_group: str | None  # a dead job's failure group (core/failure_groups.py)


class DeliveryRow(TypedDict):
    """A `deliveries` row: one event for one endpoint (or the job's callback URL), every column."""

    id: str  # the webhook-id every attempt carries
    event_id: str
    target: str  # the endpoint's id, or "callback"
    endpoint_id: str | None  # None for the job's own callback_url
    client_id: str
    job_id: str | None
    event_type: str
    url: str
    body: bytes
    request_id: str | None
    status: DeliveryStatus
    attempt_count: int  # every attempt ever: the fencing token
    budget_used: int  # attempts in the current retry budget
    next_attempt_at: datetime | None
    lease_until: datetime | None
    created_at: datetime
    updated_at: datetime


class EndpointKeys(TypedDict):
    """What a delivery's claim reads of its endpoint: whether it may still send, its secrets, its health."""

    id: str
    secret: str  # encrypted at rest
    previous_secret: str | None
    previous_expires_at: datetime | None
    active: bool
    deleted_at: datetime | None
    failing_since: datetime | None


def job_row(mapping: Any) -> JobRow:
    """A row read from `jobs` (a SQLAlchemy row mapping or a dict holding every column) as a JobRow."""
    return cast(JobRow, dict(mapping))


def job_with(job: JobRow, **changes: Any) -> JobRow:
    """A copy of `job` with some columns changed."""
    return cast(JobRow, {**job, **changes})


def delivery_row(mapping: Any) -> DeliveryRow:
    """A row read from `deliveries` (a SQLAlchemy row mapping or a dict holding every column) as a DeliveryRow."""
    return cast(DeliveryRow, dict(mapping))


def endpoint_keys(mapping: Any) -> EndpointKeys:
    """An endpoint's row, or the part of it EndpointKeys names, as EndpointKeys (more columns may ride along)."""
    return cast(EndpointKeys, dict(mapping))


class TrailEntry(TypedDict):
    """One entry of a job's audit trail, as the API shows it."""

    event: str  # the new status, or a TrailEvent
    detail: dict[str, Any]
    created_at: datetime


class TrailRow(TrailEntry):
    """A `job_events` row as written."""

    job_id: str


class ScheduleRow(TypedDict):
    """A `schedules` row: a recurring job request, every column."""

    id: str
    client_id: str
    name: str
    cron: str
    timezone: str
    job: dict[str, Any]  # the job request each firing submits, a credential written `***`
    sealed: str | None
    active: bool
    next_run_at: datetime | None
    last_run_at: datetime | None
    version: int  # a firing's compare-and-set guard
    created_at: datetime
    updated_at: datetime


class EndpointRow(EndpointKeys):
    """A `webhook_endpoints` row, every column: its keys and health (EndpointKeys), and what it subscribes to."""

    client_id: str
    url: str
    job_type: str | None  # only this job type's events, if set
    events: list[str]
    description: str | None
    job_id: str | None  # only this job's events, if set
    disabled_reason: str | None
    created_at: datetime
    updated_at: datetime


class ApiKeyRow(TypedDict):
    """An `api_keys` row: the key's hash, never the key."""

    id: str
    client_id: str
    key_hash: str
    prefix: str
    admin: bool
    created_at: datetime
    revoked_at: datetime | None


class ArtifactRow(TypedDict):
    """An `artifacts` row: a job's output file, in the row or on disk."""

    job_id: str
    client_id: str
    content_type: str
    filename: str
    size: int
    sha256: str
    data: bytes | None
    path: str | None
    created_at: datetime


class AttemptRow(TypedDict):
    """A `delivery_attempts` row as written: one attempt's outcome."""

    delivery_id: str
    attempt: int
    status_code: int | None  # None when no answer came
    error: str | None
    response_body: str | None  # its first bytes
    duration_ms: float
    next_attempt_at: datetime | None
    created_at: datetime


class DeliveryLog(DeliveryRow):
    """A delivery as its log shows it: the row, the endpoint it goes to, every attempt so far."""

    webhook_id: str | None
    attempts: list[dict[str, Any]]  # delivery_attempts rows as read, their ids too
