"""Throttled redrives as clients see them: what to send again, how many, how fast, and how far it has got."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, model_validator

from app.core.statuses import RedriveKind, RedriveStatus
from app.schemas.page import Page
from app.schemas.requests import REQUEST_CONFIG, WholeNumber

MAX_ITEMS = 100_000
MAX_PER_SECOND = 1000
PER_SECOND = "The pace: at most this many a second (fractions allowed: 0.5 is one every two seconds)."
JOB_FIELDS = ("group", "job_type", "job_ids")
DELIVERY_FIELDS = ("webhook_id", "event_type")


class RedriveIn(BaseModel):
    model_config = REQUEST_CONFIG

    # Not strict: JSON gives the kind as text, and the enum is what the text must name.
    kind: RedriveKind = Field(strict=False, description="`jobs`: dead jobs; `deliveries`: failed webhook deliveries.")
    group: str | None = Field(default=None, max_length=16, description="Jobs: a failure group's id (/dlq/groups).")
    job_type: str | None = Field(default=None, max_length=64, description="Jobs: of this type.")
    job_ids: list[str] | None = Field(default=None, min_length=1, max_length=1000, description="Jobs: these ids.")
    webhook_id: str | None = Field(default=None, max_length=36, description="Deliveries: to this endpoint.")
    event_type: str | None = Field(default=None, max_length=64, description="Deliveries: of this event type.")
    limit: WholeNumber = Field(ge=1, le=MAX_ITEMS, description="How many items to send again, at most.")
    per_second: float = Field(gt=0, le=MAX_PER_SECOND, description=PER_SECOND)

    @model_validator(mode="after")
    def _selection_fits_kind(self) -> "RedriveIn":
        mine, others = (JOB_FIELDS, DELIVERY_FIELDS) if self.kind is RedriveKind.JOBS else (DELIVERY_FIELDS, JOB_FIELDS)
        if stray := [name for name in others if getattr(self, name) is not None]:
            raise ValueError(f"{', '.join(stray)} cannot select {self.kind}; use {' or '.join(mine)}")
        if all(getattr(self, name) is None for name in mine):
            raise ValueError(f"an empty selection: give {' or '.join(mine)} to say which {self.kind} to send again")
        values = (self.group, self.job_type, self.webhook_id, self.event_type, *(self.job_ids or ()))
        if any("\x00" in (value or "") for value in values):
            raise ValueError("a selection cannot hold a NUL character")
        return self

    def selection(self) -> dict[str, Any]:
        """The fields that choose the items, as stored with the redrive."""
        names = JOB_FIELDS if self.kind is RedriveKind.JOBS else DELIVERY_FIELDS
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


class RedrivePace(BaseModel):
    """A new pace for a running or paused redrive."""

    model_config = REQUEST_CONFIG

    per_second: float = Field(gt=0, le=MAX_PER_SECOND, description=PER_SECOND)


class RedriveChange(BaseModel):
    event: str = Field(description="created, paused, resumed, rate_changed, cancelled or finished.")
    by: str | None = Field(description="The client id of the key that did it; null for the runner (finished).")
    at: datetime


class RedriveOut(BaseModel):
    id: str
    kind: RedriveKind
    client_id: str | None = Field(description="Whose items it sends again; null for an admin's: every client's.")
    selection: dict[str, Any]
    status: RedriveStatus
    total: int = Field(description="The items it took when it was created (at most its `limit`).")
    replayed: int = Field(description="Items sent again so far.")
    skipped: int = Field(description="Items no longer failed when reached (replayed or removed meanwhile).")
    limit: int
    per_second: float
    created_by: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    history: list[RedriveChange]


class RedrivePage(Page[RedriveOut]):
    pass
