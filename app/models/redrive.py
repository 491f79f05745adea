"""Throttled redrives: a set of dead jobs or failed deliveries sent again at most R a second, and the items each
one took at its creation (so its progress is exact and it reaches no item twice)."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.types import BigId, UTCDateTime


class Redrive(Base):
    __tablename__ = "redrives"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    # Whose items it sends again: the creator's client; NULL for an admin's, which covers every client's items.
    client_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_by: Mapped[str] = mapped_column(String(64))  # the client id of the key that created it
    kind: Mapped[str] = mapped_column(String(16))
    selection: Mapped[dict[str, Any]] = mapped_column(JSON)
    max_items: Mapped[int] = mapped_column(Integer)  # the N asked for; `total` is how many matched, at most N
    per_second: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16))
    total: Mapped[int] = mapped_column(Integer)
    replayed: Mapped[int] = mapped_column(Integer)
    skipped: Mapped[int] = mapped_column(Integer)
    # The seq of the last item reached: moved with that item's replay, in its transaction.
    reached: Mapped[int] = mapped_column(Integer)
    # The process driving it and until when (rule 3's lease): no two processes drive one redrive at once.
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    __table_args__ = (
        Index("ix_redrives_client_created", "client_id", "created_at", "id"),
        Index("ix_redrives_status", "status"),
    )


class RedriveItem(Base):
    """One job or delivery a redrive took, numbered in the order it sends them (oldest failure first)."""

    __tablename__ = "redrive_items"

    redrive_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    item_id: Mapped[str] = mapped_column(String(64))


class RedriveEvent(Base):
    """One change of a redrive's status (created, paused, resumed, cancelled, finished): by whom, when."""

    __tablename__ = "redrive_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    redrive_id: Mapped[str] = mapped_column(String(36), index=True)
    event: Mapped[str] = mapped_column(String(16))
    actor: Mapped[str | None] = mapped_column(String(64), nullable=True)  # a client id; None for the runner
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
