"""The jobs list's search: an index per key it looks a job up by (request id, idempotency key, unique key,
concurrency key), each partial, so that a job without that key writes nothing to it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As app/models/job.py's SEARCH_INDEXES holds them when this was written (a migration keeps its own copy).
SEARCH_INDEXES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("request", "request_id", ()),
    ("idempotency", "idempotency_key", ()),
    ("unique", "unique_key", ()),
    ("concurrency", "concurrency_key", ("created_at", "id")),
)


def upgrade() -> None:
    for name, column, order in SEARCH_INDEXES:
        predicate = sa.text(f"{column} IS NOT NULL")
        op.create_index(
            f"ix_jobs_search_{name}",
            "jobs",
            [column, *order],
            postgresql_where=predicate,
            sqlite_where=predicate,
            mssql_where=predicate,
        )


def downgrade() -> None:
    for name, _, _ in SEARCH_INDEXES:
        op.drop_index(f"ix_jobs_search_{name}", table_name="jobs")
