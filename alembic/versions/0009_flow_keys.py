"""Concurrency keys and rate limits: each job's keys (jobs.concurrency_*, jobs.rate_*), the grant of a slot or a
start (jobs.granted_run, jobs.granted_at), when a held job may be looked at again (jobs.held_until), the row each
key's admissions lock (flow_keys) and the starts of each rate window (flow_starts).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.models.types import BigId, UTCDateTime

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CONCURRENCY = sa.text("concurrency_key IS NOT NULL AND finished_at IS NULL")
RATE = sa.text("rate_key IS NOT NULL AND finished_at IS NULL")
COLUMNS = (
    ("concurrency_key", sa.String(255)),
    ("concurrency_limit", sa.Integer()),
    ("rate_key", sa.String(255)),
    ("rate_starts", sa.Integer()),
    ("rate_period", sa.Float()),
    ("granted_run", sa.Integer()),
    ("granted_at", UTCDateTime),
    ("held_until", UTCDateTime),
)


def upgrade() -> None:
    for name, kind in COLUMNS:
        op.add_column("jobs", sa.Column(name, kind, nullable=True))
    for name, column, where in (
        ("ix_jobs_concurrency", "concurrency_key", CONCURRENCY),
        ("ix_jobs_rate", "rate_key", RATE),
    ):
        op.create_index(
            name,
            "jobs",
            ["client_id", column, "created_at"],
            postgresql_where=where,
            sqlite_where=where,
            mssql_where=where,
        )
    op.create_table(
        "flow_keys",
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("client_id", "kind", "key", name="pk_flow_keys"),
    )
    op.create_table(
        "flow_starts",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("key", sa.String(255), nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_flow_starts"),
    )
    op.create_index("ix_flow_starts_key", "flow_starts", ["client_id", "key", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_flow_starts_key", table_name="flow_starts")
    op.drop_table("flow_starts")
    op.drop_table("flow_keys")
    op.drop_index("ix_jobs_rate", table_name="jobs")
    op.drop_index("ix_jobs_concurrency", table_name="jobs")
    for name, _ in reversed(COLUMNS):
        op.drop_column("jobs", name)
