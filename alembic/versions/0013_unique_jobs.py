"""Unique jobs: each job's unique key and window as submitted (jobs.unique_key, unique_seconds) and the key while
the job holds it (jobs.unique_live, NULL once released), unique per client among the jobs that hold one.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# MSSQL treats NULLs as equal in a unique constraint (DESIGN.md rule 14): filtered on every dialect.
HOLDS = sa.text("unique_live IS NOT NULL")
COLUMNS = (
    ("unique_key", sa.String(255)),
    ("unique_seconds", sa.Integer()),
    ("unique_live", sa.String(255)),
)


def upgrade() -> None:
    for name, kind in COLUMNS:
        op.add_column("jobs", sa.Column(name, kind, nullable=True))
    op.create_index(
        "uq_jobs_client_unique",
        "jobs",
        ["client_id", "unique_live"],
        unique=True,
        postgresql_where=HOLDS,
        sqlite_where=HOLDS,
        mssql_where=HOLDS,
    )


def downgrade() -> None:
    op.drop_index("uq_jobs_client_unique", table_name="jobs")
    for name, _ in reversed(COLUMNS):
        op.drop_column("jobs", name)
