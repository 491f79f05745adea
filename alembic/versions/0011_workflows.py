"""Workflows: the workflows table, each job's workflow, ref, dependencies and count of dependencies still to
let it go (jobs.workflow_id, ref, depends_on, deps_left), and the edges between a workflow's jobs
(job_dependencies).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from app.models.types import UTCDateTime

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

IN_WORKFLOW = sa.text("workflow_id IS NOT NULL")
COLUMNS = (
    ("workflow_id", sa.String(36)),
    ("ref", sa.String(64)),
    ("depends_on", sa.JSON()),
    ("deps_left", sa.Integer()),
)


def upgrade() -> None:
    op.create_table(
        "workflows",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("on_failure", sa.String(32), nullable=False),
        sa.Column("jobs_total", sa.Integer(), nullable=False),
        sa.Column("unfinished", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_workflows"),
    )
    op.create_index("ix_workflows_client_created", "workflows", ["client_id", "created_at", "id"])
    op.create_index("ix_workflows_created", "workflows", ["created_at", "id"])
    op.create_index("ix_workflows_status_finished", "workflows", ["status", "finished_at"])
    for name, kind in COLUMNS:
        op.add_column("jobs", sa.Column(name, kind, nullable=True))
    op.create_index(
        "ix_jobs_workflow",
        "jobs",
        ["workflow_id"],
        postgresql_where=IN_WORKFLOW,
        sqlite_where=IN_WORKFLOW,
        mssql_where=IN_WORKFLOW,
    )
    op.create_table(
        "job_dependencies",
        sa.Column("depends_on_id", sa.String(36), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("workflow_id", sa.String(36), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_job_dependencies_job_id_jobs", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("depends_on_id", "job_id", name="pk_job_dependencies"),
    )
    op.create_index("ix_job_dependencies_workflow_id", "job_dependencies", ["workflow_id"])


def downgrade() -> None:
    op.drop_index("ix_job_dependencies_workflow_id", table_name="job_dependencies")
    op.drop_table("job_dependencies")
    op.drop_index("ix_jobs_workflow", table_name="jobs")
    for name, _ in reversed(COLUMNS):
        op.drop_column("jobs", name)
    op.drop_index("ix_workflows_status_finished", table_name="workflows")
    op.drop_index("ix_workflows_created", table_name="workflows")
    op.drop_index("ix_workflows_client_created", table_name="workflows")
    op.drop_table("workflows")
