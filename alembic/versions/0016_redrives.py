"""Throttled redrives of dead jobs and failed deliveries (services/redrives.py): the redrive, with its progress,
lease, the items it took when it was created, and
its history.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.models.types import BigId, UTCDateTime

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "redrives",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("client_id", sa.String(64), nullable=True),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("selection", sa.JSON(), nullable=False),
        sa.Column("max_items", sa.Integer(), nullable=False),
        sa.Column("per_second", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("replayed", sa.Integer(), nullable=False),
        sa.Column("skipped", sa.Integer(), nullable=False),
        sa.Column("reached", sa.Integer(), nullable=False),
        sa.Column("lease_owner", sa.String(64), nullable=True),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=True),
    )
    op.create_index("ix_redrives_client_created", "redrives", ["client_id", "created_at", "id"])
    op.create_index("ix_redrives_status", "redrives", ["status"])
    op.create_table(
        "redrive_items",
        sa.Column("redrive_id", sa.String(36), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("item_id", sa.String(64), nullable=False),
    )
    op.create_table(
        "redrive_events",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("redrive_id", sa.String(36), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(64), nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_redrive_events_redrive_id", "redrive_events", ["redrive_id"])


def downgrade() -> None:
    op.drop_index("ix_redrive_events_redrive_id", table_name="redrive_events")
    op.drop_table("redrive_events")
    op.drop_table("redrive_items")
    op.drop_index("ix_redrives_status", table_name="redrives")
    op.drop_index("ix_redrives_client_created", table_name="redrives")
    op.drop_table("redrives")
