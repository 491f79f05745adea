"""Pausing a job type: the paused types (job_type_pauses), and jobs.held, why a job waits in the database.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-08
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.models.types import UTCDateTime

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HELD = sa.text("held IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "job_type_pauses",
        sa.Column("job_type", sa.String(64), nullable=False),
        sa.Column("paused_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("job_type", name="pk_job_type_pauses"),
    )
    op.add_column("jobs", sa.Column("held", sa.String(32), nullable=True))
    op.create_index(
        "ix_jobs_held",
        "jobs",
        ["held", "job_type", "created_at"],
        postgresql_where=HELD,
        sqlite_where=HELD,
        mssql_where=HELD,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_held", table_name="jobs")
    op.drop_column("jobs", "held")
    op.drop_table("job_type_pauses")
