"""The write of many running jobs' progress (docs/progress.md) as one UPDATE on every database: each row to its
own report, behind its run's fencing token (rule 3) and its status, so a run fenced out or already finished
writes nothing."""

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Update, update

from app.core.statuses import JobStatus
from app.models.setwise import per_row
from app.models.tables import JOBS


def progress_update(reports: Mapping[str, tuple[int, dict[str, Any]]]) -> Update:
    """One UPDATE for reports by job id, each (its run's token, the report); RETURNING the ids it wrote."""
    tokens = {job_id: runs for job_id, (runs, _) in reports.items()}
    values = {job_id: report for job_id, (_, report) in reports.items()}
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(list(reports)), JOBS.c.status == JobStatus.RUNNING)
        .where(JOBS.c.runs == per_row(JOBS.c.id, JOBS.c.runs, tokens))
        .values(progress=per_row(JOBS.c.id, JOBS.c.progress, values))
        .returning(JOBS.c.id)
    )
