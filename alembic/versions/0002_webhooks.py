"""Webhook endpoints, client secrets, deliveries and delivery attempts.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.models.types import BigId, Blob, UTCDateTime

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", sa.JSON, nullable=False),
        sa.Column("job_type", sa.String(64), nullable=True),
        sa.Column("job_id", sa.String(36), nullable=True),
        sa.Column("description", sa.String(500), nullable=True),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("disabled_reason", sa.String(255), nullable=True),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("previous_secret", sa.Text, nullable=True),
        sa.Column("previous_expires_at", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("deleted_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_endpoints"),
    )
    op.create_index("ix_webhook_endpoints_client_id", "webhook_endpoints", ["client_id"])

    op.create_table(
        "client_secrets",
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("client_id", name="pk_client_secrets"),
    )

    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("event_id", sa.String(80), nullable=False),
        sa.Column("target", sa.String(36), nullable=False),
        sa.Column("endpoint_id", sa.String(36), nullable=True),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=True),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("body", Blob, nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempt_count", sa.Integer, nullable=False),
        sa.Column("budget_used", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", UTCDateTime, nullable=True),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_deliveries"),
        sa.UniqueConstraint("event_id", "target", name="uq_deliveries_event_target"),
    )
    op.create_index("ix_deliveries_endpoint_id", "deliveries", ["endpoint_id"])
    op.create_index("ix_deliveries_job_id", "deliveries", ["job_id"])
    op.create_index("ix_deliveries_endpoint_status_created", "deliveries", ["endpoint_id", "status", "created_at"])

    op.create_table(
        "delivery_attempts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("delivery_id", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("error", sa.String(1000), nullable=True),
        sa.Column("response_body", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("next_attempt_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_delivery_attempts"),
        sa.ForeignKeyConstraint(
            ["delivery_id"], ["deliveries.id"], name="fk_delivery_attempts_delivery_id_deliveries", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_delivery_attempts_delivery_id", "delivery_attempts", ["delivery_id"])


def downgrade() -> None:
    op.drop_table("delivery_attempts")
    op.drop_table("deliveries")
    op.drop_table("client_secrets")
    op.drop_table("webhook_endpoints")
