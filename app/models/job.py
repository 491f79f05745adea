"""Jobs and their audit trail."""

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.types import BigId, UTCDateTime


def partial_index(name: str, where: str, *columns: str, unique: bool = False) -> Index:
    """An index of the rows that satisfy `where`, on every dialect (PostgreSQL's and SQLite's partial index,
    MSSQL's filtered index)."""
    predicate = text(where)
    return Index(
        name, *columns, unique=unique, postgresql_where=predicate, sqlite_where=predicate, mssql_where=predicate
    )


# The predicates of the fair-turn indexes, as the migration that made them wrote them; the statements that read the
# indexes use these very texts (stores/flow/fair.py, stores/flow/postgres.py), so the planner matches them.
IN_LANE_WHERE = "status IN ('pending', 'queued') AND held IS NULL"
WAITS_TURN_WHERE = "held = 'fair' AND status IN ('pending', 'queued')"
# The overview's indexes (migration 0017); its statements repeat these texts so the planner matches them.
FINISHED_WHERE = "finished_at IS NOT NULL"
RETRYING_WHERE = "event = 'retrying'"
DEAD_WHERE = "status = 'dead_lettered'"
# The search's indexes: their name, column and the columns after it (a concurrency key may hold many jobs, read
# newest first; the others hold one, or a batch's).
SEARCH_INDEXES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("request", "request_id", ()),
    ("idempotency", "idempotency_key", ()),
    ("unique", "unique_key", ()),
    ("concurrency", "concurrency_key", ("created_at", "id")),
)


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(64))
    job_type: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int] = mapped_column(Integer)
    max_retries: Mapped[int] = mapped_column(Integer)
    timeout_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    # attempts: runs in the current retry budget; runs: every run ever (the fencing token); seq: status changes.
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    runs: Mapped[int] = mapped_column(Integer, default=0)
    seq: Mapped[int] = mapped_column(Integer, default=0)
    payload: Mapped[Any] = mapped_column(JSON)
    # A notification's credentials, sealed with SECRET_ENCRYPTION_KEY; the payload shows `***` where they stood.
    sealed: Mapped[str | None] = mapped_column(Text, nullable=True)
    result: Mapped[Any | None] = mapped_column(JSON, nullable=True)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    dead_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    request_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    callback_url: Mapped[str | None] = mapped_column(String(2048), nullable=True)
    request_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # When a job submitted with run_at or delay_seconds is due; while it is `scheduled`, next_attempt_at holds
    # the same time, so the scheduler's scan rides the (status, next_attempt_at) index.
    run_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Why a job waiting to start is held back in the database (core/statuses.HeldReason: its type is paused);
    # NULL for every job that may run. Not a status: a held job stays pending, queued or retrying.
    held: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # Flow control (docs/flow-control.md): at most concurrency_limit of the client's jobs with concurrency_key run
    # at once; at most rate_starts of those with rate_key start in any rate_period seconds. NULL: not limited.
    concurrency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    concurrency_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    rate_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    rate_starts: Mapped[int | None] = mapped_column(Integer, nullable=True)
    rate_period: Mapped[float | None] = mapped_column(Float, nullable=True)
    # A keyed job admitted to run: the run its slot (and start) was granted for (runs + 1 when granted), and when.
    # Until that run starts, or the grant is a lease old, the grant counts against its concurrency key.
    granted_run: Mapped[int | None] = mapped_column(Integer, nullable=True)
    granted_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # A job held for its rate window: the earliest time the window may let it start.
    held_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # Workflows (docs/workflows.md): the workflow a job belongs to, its ref there, the ids of the jobs it waits
    # for (as submitted; the edges are rows of job_dependencies), and how many of those have not yet let it go:
    # each outcome that does takes one off, in the transaction that records it; the one that takes it to 0
    # releases the job (waiting -> pending). NULL for a job outside a workflow.
    workflow_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    ref: Mapped[str | None] = mapped_column(String(64), nullable=True)
    depends_on: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    deps_left: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Unique jobs (docs/job-types.md): the key and window as submitted, and the key again while this job holds it
    # (not terminal, or within its window): the submit that finds the job past both clears it, releasing the key.
    unique_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    unique_seconds: Mapped[int | None] = mapped_column(Integer, nullable=True)
    unique_live: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # What the handler last reported of its run (docs/progress.md): {"fraction", "message", "updated_at"}, or NULL.
    # Written at most once a second per job, and the last value with the run's outcome.
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # When a cancel of the job was asked for while it ran; NULL otherwise. Not a status: the job stays running until
    # the worker that runs it stops the handler and records it cancelled (or it finishes first). The worker hears
    # of it by the control fanout, or else when it renews the job's lease.
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # A dead job's failure group (core/failure_groups.py: its type, error class and masked message), written with
    # its dead-lettering; what it holds once the job has left dead_lettered means nothing.
    failure_group: Mapped[str | None] = mapped_column(String(16), nullable=True)

    __table_args__ = (
        # MSSQL treats NULLs as equal in a unique constraint: filter them out on every dialect.
        partial_index(
            "uq_jobs_client_idempotency", "idempotency_key IS NOT NULL", "client_id", "idempotency_key", unique=True
        ),
        # One job per client and unique key while it holds the key: the net under concurrent submits.
        partial_index("uq_jobs_client_unique", "unique_live IS NOT NULL", "client_id", "unique_live", unique=True),
        Index("ix_jobs_client_created", "client_id", "created_at", "id"),
        Index("ix_jobs_created", "created_at", "id"),
        Index("ix_jobs_status_next", "status", "next_attempt_at"),
        # Retention's scan for jobs finished long ago. Partial, so that only the change that finishes a job adds
        # an entry: the other status changes of the hot path do not write to it.
        partial_index("ix_jobs_status_finished", "finished_at IS NOT NULL", "status", "finished_at"),
        # The release's scan for held jobs whose reason has passed, oldest first within a type. Partial, so the
        # hot path's changes of jobs that are not held never write to it.
        partial_index("ix_jobs_held", "held IS NOT NULL", "held", "job_type", "created_at"),
        # A key's unfinished jobs, oldest first: its running count, its held jobs' release order. Partial: keyless
        # and finished jobs are not in them.
        *(
            partial_index(name, f"{column} IS NOT NULL AND finished_at IS NULL", "client_id", column, "created_at")
            for name, column in (("ix_jobs_concurrency", "concurrency_key"), ("ix_jobs_rate", "rate_key"))
        ),
        # Fair turns: a client's jobs in a lane now (counted at each submit), and those waiting their turn, in the
        # order of their release. Partial: a job leaves the first as it is claimed and is in the second only while
        # it waits its turn.
        partial_index("ix_jobs_waiting", IN_LANE_WHERE, "client_id", "priority"),
        partial_index("ix_jobs_fair", WAITS_TURN_WHERE, "client_id", "priority", "created_at"),
        # A workflow's jobs. Partial: jobs outside a workflow are not in it.
        partial_index("ix_jobs_workflow", "workflow_id IS NOT NULL", "workflow_id"),
        # The DLQ's groups (docs/dlq.md): read by an index-only scan. Partial: only dead jobs are in it, so only
        # the changes into and out of dead_lettered write to it.
        partial_index(
            "ix_jobs_failure_group", DEAD_WHERE, "client_id", "failure_group", "job_type", "finished_at", "id"
        ),
        # The overview's counts by status and type (services/overview): an index-only scan of a client's range, or
        # of the whole index for an admin, instead of the table.
        Index("ix_jobs_client_status_type", "client_id", "status", "job_type"),
        # The overview's run times per type, newest first. Partial: a job enters it once, as it finishes.
        partial_index("ix_jobs_type_finished", FINISHED_WHERE, "job_type", "finished_at"),
        # The jobs list's search (services/job_search.py): an exact id, request id or key, for one client or, an
        # admin's, for all. Partial: a job without the key writes nothing to its index.
        *(
            partial_index(f"ix_jobs_search_{name}", f"{column} IS NOT NULL", column, *order)
            for name, column, order in SEARCH_INDEXES
        ),
    )


class JobEvent(Base):
    """One row of a job's audit trail."""

    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(String(36), ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    event: Mapped[str] = mapped_column(String(32))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)

    # The overview's failed attempts per minute (services/overview). Partial: only a retry's row writes to it.
    __table_args__ = (partial_index("ix_job_events_retrying", RETRYING_WHERE, "created_at", "job_id"),)
