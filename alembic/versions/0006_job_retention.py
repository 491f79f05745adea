"""Retention of finished jobs: an index on (status, finished_at) over the jobs that have finished.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FINISHED = sa.text("finished_at IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_jobs_status_finished",
        "jobs",
        ["status", "finished_at"],
        postgresql_where=FINISHED,
        sqlite_where=FINISHED,
        mssql_where=FINISHED,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_status_finished", table_name="jobs")
