"""Workflows (docs/workflows.md): a client's jobs that wait for one another, and the edges between them."""

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.types import UTCDateTime


class Workflow(Base):
    """One workflow: its jobs are rows of `jobs` with its id. `unfinished` counts its jobs not yet terminal, moved
    in the transaction that records each outcome (DESIGN rule 19): the one that takes it to 0 ends the workflow."""

    __tablename__ = "workflows"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(64))
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    on_failure: Mapped[str] = mapped_column(String(32))
    jobs_total: Mapped[int] = mapped_column(Integer)
    unfinished: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(Integer)  # status changes so far: its events' ids
    request_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)

    __table_args__ = (
        Index("ix_workflows_client_created", "client_id", "created_at", "id"),
        Index("ix_workflows_created", "created_at", "id"),
        Index("ix_workflows_status_finished", "status", "finished_at"),
    )


class JobDependency(Base):
    """One edge: `job_id` waits for `depends_on_id`, both jobs of `workflow_id`. Read by the dependency (whose
    outcome moves its dependents) and by the workflow (its whole graph, for a cascade). Deleted with the
    dependent; only one foreign key cascades, as MSSQL allows one cascade path to a table."""

    __tablename__ = "job_dependencies"

    depends_on_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(36), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    workflow_id: Mapped[str] = mapped_column(String(36), index=True)
