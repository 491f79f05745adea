"""Rows as the code passes them around: typed, so a wrong key is a type error, not a KeyError at run time."""

from datetime import datetime
from typing import Any, TypedDict, cast


class JobRow(TypedDict):
    """A `jobs` row: the job as stored, every column."""

    id: str
    client_id: str
    job_type: str
    status: str
    priority: int
    max_retries: int
    timeout_seconds: float | None
    attempts: int  # runs in the current retry budget
    runs: int  # every run ever: the fencing token
    seq: int  # status changes so far: the compare-and-set guard and the event's ordering
    payload: Any
    result: Any
    error: dict[str, Any] | None
    dead_reason: str | None
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


def job_row(mapping: Any) -> JobRow:
    """A row read from `jobs` (a SQLAlchemy row mapping or a dict holding every column) as a JobRow."""
    return cast(JobRow, dict(mapping))


def job_with(job: JobRow, **changes: Any) -> JobRow:
    """A copy of `job` with some columns changed."""
    return cast(JobRow, {**job, **changes})
