"""Flow control as a job request gives it and a job shows it (docs/flow-control.md): a concurrency key with its
limit, a rate key with its starts per period."""

from datetime import datetime
from typing import Any, TypedDict

from pydantic import BaseModel, Field

from app.schemas.requests import REQUEST_CONFIG, WholeNumber

MAX_CONCURRENCY = 1000
MAX_RATE_STARTS = 1_000_000
MIN_PERIOD_SECONDS = 0.1
MAX_PERIOD_SECONDS = 86_400


class Concurrency(BaseModel):
    """At most `limit` of the client's jobs with this key run at once, across every worker process."""

    model_config = REQUEST_CONFIG

    key: str = Field(min_length=1, max_length=255, description="Scoped to the client.")
    limit: WholeNumber = Field(ge=1, le=MAX_CONCURRENCY, description="1 runs the key's jobs one at a time, in order.")


class RateLimit(BaseModel):
    """At most `limit` of the client's jobs with this key start in any window of `period_seconds`."""

    model_config = REQUEST_CONFIG

    key: str = Field(min_length=1, max_length=255, description="Scoped to the client.")
    limit: WholeNumber = Field(ge=1, le=MAX_RATE_STARTS)
    period_seconds: float = Field(
        ge=MIN_PERIOD_SECONDS, le=MAX_PERIOD_SECONDS, allow_inf_nan=False, strict=False, description="The window."
    )


class FlowColumns(TypedDict):
    """A job row's flow-control columns (app/models/rows.JobRow's)."""

    concurrency_key: str | None
    concurrency_limit: int | None
    rate_key: str | None
    rate_starts: int | None
    rate_period: float | None
    granted_run: int | None
    granted_at: datetime | None
    held_until: datetime | None


def flow_columns(concurrency: Concurrency | None, rate_limit: RateLimit | None) -> FlowColumns:
    """A new job's flow-control columns (all NULL for a job without keys)."""
    return {
        "concurrency_key": concurrency.key if concurrency else None,
        "concurrency_limit": concurrency.limit if concurrency else None,
        "rate_key": rate_limit.key if rate_limit else None,
        "rate_starts": rate_limit.limit if rate_limit else None,
        "rate_period": rate_limit.period_seconds if rate_limit else None,
        "granted_run": None,
        "granted_at": None,
        "held_until": None,
    }


def shown(row: dict[str, Any]) -> dict[str, Any]:
    """`concurrency` and `rate_limit` as a job shows them, from its row's columns (null when none)."""
    key, period = row.get("concurrency_key"), row.get("rate_period")
    concurrency = {"key": key, "limit": row.get("concurrency_limit")} if key is not None else None
    rate = {"key": row.get("rate_key"), "limit": row.get("rate_starts"), "period_seconds": period}
    return {"concurrency": concurrency, "rate_limit": rate if row.get("rate_key") is not None else None}
