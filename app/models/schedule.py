"""Recurring schedules: a cron expression in a time zone, and the job each firing submits."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.types import UTCDateTime


class Schedule(Base):
    __tablename__ = "schedules"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    cron: Mapped[str] = mapped_column(String(255))
    timezone: Mapped[str] = mapped_column(String(64))
    job: Mapped[dict[str, Any]] = mapped_column(JSON)  # the job request each firing submits
    # The credentials of that job's payload, sealed; `job` shows `***` where they stood (services/payload_secrets).
    sealed: Mapped[str | None] = mapped_column(Text, nullable=True)
    active: Mapped[bool] = mapped_column(Boolean)
    # The next firing (UTC); kept while paused, recomputed from now when the schedule is made active again.
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Grows with every firing and change: the compare-and-set guard that lets one scheduler take a firing.
    version: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index("ix_schedules_due", "active", "next_run_at"),
        Index("ix_schedules_client_created", "client_id", "created_at", "id"),
    )
