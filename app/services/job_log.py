"""One INFO line per finished job (CONTRACT, Operations), so `GET /api/v1/logs?level=INFO` finds a request's jobs."""

from datetime import datetime

from loguru import logger

from app.models.rows import JobRow


def finished(job: JobRow, status: str, at: datetime | None) -> None:
    """Log a job that has just finished (succeeded, dead-lettered or cancelled) at `at`. With INFO off (the bench
    keeps LOG_LEVEL=WARNING) loguru returns before formatting anything: a subtraction and a call per job
    (about a microsecond)."""
    started = job["started_at"]
    ran = (at - started).total_seconds() if at is not None and started is not None else 0.0  # never started: 0
    logger.info(
        "job {} ({}) {}: {} attempt(s), run time {:.3f}s, request {}",
        job["id"],
        job["job_type"],
        status,
        job["attempts"],
        ran,
        job["request_id"] or "-",
    )
