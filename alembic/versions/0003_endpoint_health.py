"""Endpoint health: when an endpoint started failing every attempt.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.models.types import UTCDateTime

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("webhook_endpoints", sa.Column("failing_since", UTCDateTime, nullable=True))
    op.create_index("ix_job_events_created_at", "job_events", ["created_at"])
    op.create_index("ix_delivery_attempts_created_at", "delivery_attempts", ["created_at"])
    op.create_index("ix_deliveries_created_at", "deliveries", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_created_at", "deliveries")
    op.drop_index("ix_delivery_attempts_created_at", "delivery_attempts")
    op.drop_index("ix_job_events_created_at", "job_events")
    op.drop_column("webhook_endpoints", "failing_since")
