"""Webhook endpoints, clients' default secrets, deliveries and every delivery attempt."""

from datetime import datetime

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.types import BigId, Blob, UTCDateTime


class WebhookEndpoint(Base):
    __tablename__ = "webhook_endpoints"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(64), index=True)
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[list[str]] = mapped_column(JSON)
    job_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    job_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    description: Mapped[str | None] = mapped_column(String(500), nullable=True)
    active: Mapped[bool] = mapped_column(Boolean)
    disabled_reason: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # Set at the first failed attempt after a success; an endpoint failing for long enough is disabled.
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Encrypted at rest (rule 13); the previous secret keeps signing until previous_expires_at.
    secret: Mapped[str] = mapped_column(Text)
    previous_secret: Mapped[str | None] = mapped_column(Text, nullable=True)
    previous_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ClientSecret(Base):
    """The secret that signs a client's `callback_url` deliveries."""

    __tablename__ = "client_secrets"

    client_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    secret: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Delivery(Base):
    """One event for one endpoint: its id is the `webhook-id` every attempt carries."""

    __tablename__ = "deliveries"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    event_id: Mapped[str] = mapped_column(String(80))
    # The endpoint's id, or "callback" for the job's own callback_url (rule 10: unique per event and target).
    target: Mapped[str] = mapped_column(String(36))
    endpoint_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    client_id: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[str | None] = mapped_column(String(36), nullable=True, index=True)
    event_type: Mapped[str] = mapped_column(String(64))
    url: Mapped[str] = mapped_column(String(2048))
    body: Mapped[bytes] = mapped_column(Blob)
    request_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    attempt_count: Mapped[int] = mapped_column(Integer)
    # Attempts in the current retry budget; a redelivery or recovery starts a new one.
    budget_used: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        UniqueConstraint("event_id", "target", name="uq_deliveries_event_target"),
        Index("ix_deliveries_endpoint_status_created", "endpoint_id", "status", "created_at"),
        # An endpoint's deliveries by time, whatever their status: its delivery table's pages, its stats' window.
        Index("ix_deliveries_endpoint_created", "endpoint_id", "created_at", "id"),
        Index("ix_deliveries_created_at", "created_at"),
    )


class DeliveryAttempt(Base):
    __tablename__ = "delivery_attempts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str] = mapped_column(String(64), ForeignKey("deliveries.id", ondelete="CASCADE"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    duration_ms: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    response_body: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
