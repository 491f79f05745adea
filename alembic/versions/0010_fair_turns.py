"""Fair turns in a lane: a client's jobs in a lane now (ix_jobs_waiting) and those waiting their turn in the
database, in the order of their release (ix_jobs_fair). Both partial, so the hot path's other changes do not
write to them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WAITING = sa.text("status IN ('pending', 'queued') AND held IS NULL")
FAIR = sa.text("held = 'fair' AND status IN ('pending', 'queued')")


def upgrade() -> None:
    for name, columns, where in (
        ("ix_jobs_waiting", ["client_id", "priority"], WAITING),
        ("ix_jobs_fair", ["client_id", "priority", "created_at"], FAIR),
    ):
        op.create_index(name, "jobs", columns, postgresql_where=where, sqlite_where=where, mssql_where=where)


def downgrade() -> None:
    op.drop_index("ix_jobs_fair", table_name="jobs")
    op.drop_index("ix_jobs_waiting", table_name="jobs")
