"""The DLQ's failure groups: each dead job's group (jobs.failure_group: its type, error class and masked message,
core/failure_groups.py), written when it is dead-lettered, and the partial index of dead jobs the groups are read
from. Jobs already dead are given theirs here.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from alembic import context, op
from app.core.failure_groups import group_of

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEAD_WHERE = "status = 'dead_lettered'"
COLUMNS = ("client_id", "failure_group", "job_type", "finished_at", "id")
BATCH = 1000


def upgrade() -> None:
    op.add_column("jobs", sa.Column("failure_group", sa.String(16), nullable=True))
    if not context.is_offline_mode():  # rendered SQL (MSSQL) cannot hash: its jobs dead before now stay ungrouped
        _group_the_dead()
    predicate = sa.text(DEAD_WHERE)
    op.create_index(
        "ix_jobs_failure_group",
        "jobs",
        list(COLUMNS),
        postgresql_where=predicate,
        sqlite_where=predicate,
        mssql_where=predicate,
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_failure_group", table_name="jobs")
    op.drop_column("jobs", "failure_group")


def _group_the_dead() -> None:
    """Every dead job's group, a batch at a time (a database that has been up for months may hold many)."""
    conn = op.get_bind()
    jobs = sa.table("jobs", sa.column("id"), sa.column("job_type"), sa.column("error"), sa.column("failure_group"))
    status: sa.ColumnClause[str] = sa.column("status")
    while True:
        ungrouped = (
            sa.select(jobs.c.id, jobs.c.job_type, jobs.c.error)
            .select_from(jobs)
            .where(status == "dead_lettered", jobs.c.failure_group.is_(None))
            .limit(BATCH)
        )
        rows = conn.execute(ungrouped).all()
        if not rows:
            return
        for job_id, job_type, error in rows:
            conn.execute(
                sa.update(jobs).where(jobs.c.id == job_id).values(failure_group=group_of(job_type, _loaded(error)))
            )


def _loaded(error: Any) -> dict[str, Any] | None:
    """The error column as a dict, whether the driver hands JSON back parsed or as text."""
    value = json.loads(error) if isinstance(error, str | bytes) else error
    return value if isinstance(value, dict) else None
