"""Unique jobs as a job request gives them and a job shows them (docs/job-types.md, "Unique jobs"): while a job of
the client with this key is not terminal, or younger than its window, a submit with the key makes nothing new."""

from typing import Any, TypedDict

from pydantic import BaseModel, Field

from app.schemas.requests import REQUEST_CONFIG, WholeNumber

MAX_UNIQUE_SECONDS = 365 * 24 * 3600  # a year, as the longest delay


class Unique(BaseModel):
    """One job of the client's with this key at a time: a duplicate submit answers with that job."""

    model_config = REQUEST_CONFIG

    key: str = Field(min_length=1, max_length=255, description="Scoped to the client.")
    for_seconds: WholeNumber | None = Field(
        default=None,
        ge=0,
        le=MAX_UNIQUE_SECONDS,
        description="Also hold the key this long after the job was created, finished or not; by default only "
        "while it is not terminal.",
    )


class UniqueColumns(TypedDict):
    """A job row's unique-job columns (app/models/rows.JobRow's)."""

    unique_key: str | None
    unique_seconds: int | None
    unique_live: str | None


def unique_columns(unique: Unique | None) -> UniqueColumns:
    """A new job's unique-job columns: the key as submitted and, while it holds the key, `unique_live` (all NULL
    for a job without one)."""
    key = unique.key if unique else None
    return {"unique_key": key, "unique_seconds": unique.for_seconds if unique else None, "unique_live": key}


def shown_unique(row: dict[str, Any]) -> dict[str, Any] | None:
    """`unique` as a job shows it, from its row's columns (null when none)."""
    key = row.get("unique_key")
    return None if key is None else {"key": key, "for_seconds": row.get("unique_seconds")}
