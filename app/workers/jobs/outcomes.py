"""What a run ended in, as the job store records it: succeeded, retrying, dead-lettered (by the retry policy, or
because the service could not process the job's message), or cancelled (stopped: its cancel was asked for)."""

from datetime import datetime
from typing import Any

from app.core.failure_groups import group_of
from app.core.statuses import DeadReason, JobStatus
from app.models.rows import JobRow, job_with
from app.models.types import utcnow
from app.stores.jobs import JobStore, Moved, Outcome
from app.workers import unprocessable

S = JobStatus


def with_last_report(job: JobRow, report: dict[str, Any] | None) -> JobRow:
    """The run's job (as claimed) with its handler's last progress report, for its outcome to record; as it was
    when the run reported nothing (then no one wrote its progress since the claim: rule 3's token fences it)."""
    return job if report is None else job_with(job, progress=report)


def succeeded(job: JobRow, result: Any) -> Outcome:
    values = {"result": result, "error": None, "finished_at": utcnow(), "lease_until": None, **_progress(job)}
    return Outcome(job, S.SUCCEEDED, values, {})


def retrying(job: JobRow, error: dict[str, Any], next_attempt_at: datetime) -> Outcome:
    values = {"error": error, "next_attempt_at": next_attempt_at, "lease_until": None, **_progress(job)}
    return Outcome(job, S.RETRYING, values, {"error": error, "next_attempt_at": next_attempt_at.isoformat()})


def dead_lettered(job: JobRow, error: dict[str, Any], reason: str) -> Outcome:
    values = {"error": error, "dead_reason": str(reason), "finished_at": utcnow(), "lease_until": None}
    values["failure_group"] = group_of(job["job_type"], error)
    values.update(_progress(job))
    return Outcome(job, S.DEAD_LETTERED, values, {"error": error, "reason": str(reason)})


def cancelled(job: JobRow) -> Outcome:
    return Outcome(job, S.CANCELLED, {"finished_at": utcnow(), "lease_until": None, **_progress(job)}, {})


def _progress(job: JobRow) -> dict[str, Any]:
    return {"progress": job["progress"]} if job.get("progress") is not None else {}


async def give_up(store: JobStore, job_id: str, error: dict[str, Any]) -> Moved | None:
    """Dead-letter a job whose message the service failed to process (reason `unprocessable`), with its audit
    row and event; None when it has left the statuses that may be (finished, or gone). Should the job's own
    values break that too, its row and audit row are written alone, with no event."""
    reason = str(DeadReason.UNPROCESSABLE)
    values = {"error": error, "dead_reason": reason, "finished_at": utcnow(), "lease_until": None}
    try:
        return await store.give_up(job_id, values, {"error": error, "reason": reason})
    except Exception as exc:
        if unprocessable.is_outage(exc):
            raise
    await store.give_up_bare(job_id, values)
    return None
