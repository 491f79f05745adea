"""The credentials of a job's payload, sealed: jobs.sealed, and schedules.sealed for a schedule's job.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("sealed", sa.Text, nullable=True))
    op.add_column("schedules", sa.Column("sealed", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("schedules", "sealed")
    op.drop_column("jobs", "sealed")
