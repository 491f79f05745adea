"""The overview's indexes: counts by client, status and type read by an index-only scan; each type's finished jobs
newest first, for its run times; the audit rows of retries, for the failed attempts per minute. The partial ones
are written once per job (as it finishes) or once per retry, not at every status change.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FINISHED_WHERE = "finished_at IS NOT NULL"
RETRYING_WHERE = "event = 'retrying'"


def upgrade() -> None:
    op.create_index("ix_jobs_client_status_type", "jobs", ["client_id", "status", "job_type"])
    _partial("ix_jobs_type_finished", "jobs", ["job_type", "finished_at"], FINISHED_WHERE)
    _partial("ix_job_events_retrying", "job_events", ["created_at", "job_id"], RETRYING_WHERE)


def downgrade() -> None:
    op.drop_index("ix_job_events_retrying", table_name="job_events")
    op.drop_index("ix_jobs_type_finished", table_name="jobs")
    op.drop_index("ix_jobs_client_status_type", table_name="jobs")


def _partial(name: str, table: str, columns: list[str], where: str) -> None:
    predicate = sa.text(where)
    op.create_index(name, table, columns, postgresql_where=predicate, sqlite_where=predicate, mssql_where=predicate)
