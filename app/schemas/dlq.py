"""The dead-letter queue as clients see it."""

from pydantic import BaseModel, ConfigDict, Field

from app.schemas.job import JobOut


class DeadJobOut(JobOut):
    reason: str | None = Field(description="retries_exhausted, permanent_error, timeout or worker_lost.")


class DeadJobPage(BaseModel):
    items: list[DeadJobOut]
    next_cursor: str | None


class DlqStats(BaseModel):
    dead_lettered: int
    by_job_type: dict[str, int]
    by_reason: dict[str, int]
    broker_depth: int | None = Field(default=None, description="Messages in the broker's DLQ (admins only).")


class ReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_ids: list[str] | None = Field(default=None, max_length=1000)
    job_type: str | None = None
    limit: int = Field(default=100, ge=1, le=1000)


class ReplayOut(BaseModel):
    replayed: int
    job_ids: list[str]
