"""Jobs, their audit trail, the outbox and API keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.models.types import BigId, Blob, UTCDateTime

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NOT_NULL_KEY = sa.text("idempotency_key IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("job_type", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer, nullable=False),
        sa.Column("max_retries", sa.Integer, nullable=False),
        sa.Column("timeout_seconds", sa.Float, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("runs", sa.Integer, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("result", sa.JSON, nullable=True),
        sa.Column("error", sa.JSON, nullable=True),
        sa.Column("dead_reason", sa.String(32), nullable=True),
        sa.Column("idempotency_key", sa.String(255), nullable=True),
        sa.Column("request_hash", sa.String(64), nullable=True),
        sa.Column("callback_url", sa.String(2048), nullable=True),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("lease_until", UTCDateTime, nullable=True),
        sa.Column("next_attempt_at", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
    )
    op.create_index(
        "uq_jobs_client_idempotency",
        "jobs",
        ["client_id", "idempotency_key"],
        unique=True,
        postgresql_where=NOT_NULL_KEY,
        sqlite_where=NOT_NULL_KEY,
        mssql_where=NOT_NULL_KEY,
    )
    op.create_index("ix_jobs_client_created", "jobs", ["client_id", "created_at", "id"])
    op.create_index("ix_jobs_created", "jobs", ["created_at", "id"])
    op.create_index("ix_jobs_status_next", "jobs", ["status", "next_attempt_at"])

    op.create_table(
        "job_events",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("detail", sa.JSON, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_job_events"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_job_events_job_id_jobs", ondelete="CASCADE"),
    )
    op.create_index("ix_job_events_job_id", "job_events", ["job_id"])

    op.create_table(
        "outbox",
        sa.Column("id", BigId, autoincrement=True, nullable=False),
        sa.Column("exchange", sa.String(255), nullable=False),
        sa.Column("routing_key", sa.String(255), nullable=False),
        sa.Column("body", Blob, nullable=False),
        sa.Column("headers", sa.JSON, nullable=False),
        sa.Column("priority", sa.Integer, nullable=True),
        sa.Column("message_id", sa.String(64), nullable=True),
        sa.Column("job_id", sa.String(36), nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("locked_by", sa.String(36), nullable=True),
        sa.Column("locked_until", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_outbox"),
    )
    op.create_index("ix_outbox_created", "outbox", ["created_at"])

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("admin", sa.Boolean, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("revoked_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_index("ix_api_keys_client_id", "api_keys", ["client_id"])


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_table("outbox")
    op.drop_table("job_events")
    op.drop_table("jobs")
