"""The overview (`GET /api/v1/overview`): what an operator reads first, kept server-side (docs/dashboard.md)."""

from datetime import datetime

from pydantic import BaseModel, Field


class TypeCounts(BaseModel):
    job_type: str
    counts: dict[str, int] = Field(description="Jobs of this type by status; a status with none is left out.")


class Minute(BaseModel):
    at: datetime = Field(description="The minute's start (UTC).")
    submitted: int = Field(description="Jobs created in the minute.")
    succeeded: int = Field(description="Jobs that succeeded in the minute.")
    retrying: int = Field(description="Failed attempts that will be retried, recorded in the minute.")
    dead_lettered: int = Field(description="Jobs dead-lettered in the minute and dead still.")
    cancelled: int = Field(description="Jobs cancelled in the minute.")
    failure_rate: float | None = Field(
        description="(retrying + dead_lettered) / (retrying + dead_lettered + succeeded); null when none ended."
    )


class HourTotals(BaseModel):
    submitted: int
    succeeded: int
    retrying: int
    dead_lettered: int
    cancelled: int
    failure_rate: float | None


class Throughput(BaseModel):
    bucket_seconds: int = Field(description="The width of a bucket: 60.")
    minutes: list[Minute] = Field(description="The current minute and the 59 before it, oldest first.")
    last_hour: HourTotals = Field(description="The minutes added up.")


class Timing(BaseModel):
    job_type: str
    sample: int = Field(description="How many runs the percentiles come from: the type's latest, at most 500.")
    run_p50: float | None = Field(description="Seconds from start to finish of the last run; null with no sample.")
    run_p95: float | None
    wait_p50: float | None = Field(description="Seconds from due (created or run_at, the later) to started.")
    wait_p95: float | None


class DeadHour(BaseModel):
    at: datetime = Field(description="The hour's start (UTC).")
    dead_lettered: int = Field(description="Jobs dead-lettered in the hour and dead still (a replay takes one out).")


class DlqTrend(BaseModel):
    size: int = Field(description="Dead-lettered jobs now.")
    last_hour: int = Field(description="Of those, dead-lettered in the last 60 minutes.")
    an_hour_ago: int = Field(description="The size less `last_hour`: the DLQ an hour ago, replays aside.")
    hourly: list[DeadHour] = Field(description="The current hour and the 23 before it, oldest first.")


class FailingEndpoint(BaseModel):
    id: str
    url: str
    active: bool
    circuit: str = Field(description="`open` (or half-open), `closed`, or `unknown` when Redis cannot be read.")
    failures: int = Field(description="Failed attempts in the last 15 minutes.")
    last_error: str | None
    last_failed_at: datetime | None
    failing_since: datetime | None = Field(description="Since when every attempt has failed; null once one succeeds.")


class OverviewOut(BaseModel):
    generated_at: datetime = Field(description="When the figures were read from the database.")
    fresh_for_seconds: float = Field(description="How long this answer is served again to the same scope.")
    counts: dict[str, int] = Field(
        description="Jobs by status, every status named (0 for none): the live ones and `dead_lettered` read now, "
        "`succeeded` and `cancelled` as of `by_type_at`."
    )
    by_type: list[TypeCounts] = Field(description="Jobs by type and status, as of `by_type_at`.")
    by_type_at: datetime = Field(
        description="When `by_type`, `timings` and the finished totals were counted: a scan of every job's index "
        "entry, made at most every 30 s per scope in the background (the answer never waits for it but the first)."
    )
    throughput: Throughput
    timings: list[Timing] = Field(description="Run time and queue wait per type, over the hour before `by_type_at`.")
    dlq: DlqTrend
    failing_endpoints: list[FailingEndpoint] = Field(
        description="The caller's endpoints with an open circuit or a failed attempt in the last 15 minutes."
    )
