"""Cancelling a running job: when its cancel was asked for (jobs.cancel_requested_at), so the worker that runs it
sees the request when it renews its lease, whether or not the control message reached it.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.models.types import UTCDateTime

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("cancel_requested_at", UTCDateTime, nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "cancel_requested_at")
