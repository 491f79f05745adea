"""Pre-loading N queued `echo` jobs for a drain, with the service's own code, without the HTTP round trips.

Submitting over HTTP would spend most of a drain scenario's time in the API. Instead each job row is built
by the service's own `new_job_row`, already past the broker's confirm (status `queued`, seq 1, with its
`created` and `queued` audit rows), inserted with the service's engine and tables in a few batches, and its
message is built by the service's `JobMessage` / `job_outgoing` and published, persistent, confirmed and
mandatory, into its lane: what the API leaves behind for a worker, minus the events nobody consumes.
"""

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import insert

from app.core.database import make_engine
from app.core.names import Names
from app.models.tables import JOB_EVENTS, JOBS
from app.models.types import utcnow
from app.schemas.job import JOB_REQUEST
from app.services.submit import as_queued, new_job_row
from bench.infra import Broker

BATCH = 1000


Fields = Callable[[int], dict[str, Any]]  # the n-th job's request fields beside its type and payload


def job_rows(
    client_id: str, count: int, fields: Fields | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`count` queued echo jobs and their audit rows, oldest first."""
    start = utcnow()
    jobs, events = [], []
    for number in range(count):
        now = start + timedelta(microseconds=number)
        extra = fields(number) if fields else {}
        request = JOB_REQUEST.validate_python({"job_type": "echo", "payload": {"n": number, "bench": True}, **extra})
        job = as_queued(new_job_row(client_id, request, uuid.uuid4().hex, now), now)
        jobs.append(job)
        events.append({"job_id": job["id"], "event": "created", "detail": _trail(None, "pending"), "created_at": now})
        events.append(
            {"job_id": job["id"], "event": "queued", "detail": _trail("pending", "queued"), "created_at": now}
        )
    return jobs, events


def _trail(before: str | None, after: str) -> dict[str, Any]:
    return {"from": before, "to": after, "attempt": 0}


async def preload(
    database_url: str, broker: Broker, names: Names, client_id: str, count: int, fields: Fields | None = None
) -> list[str]:
    """Insert `count` queued echo jobs and publish their messages; returns their ids."""
    jobs = await save_queued(database_url, client_id, count, fields)
    await broker.publish_job_messages(names, jobs)
    return [job["id"] for job in jobs]


async def save_queued(
    database_url: str, client_id: str, count: int, fields: Fields | None = None
) -> list[dict[str, Any]]:
    """Insert `count` queued echo jobs (their messages not yet published); returns their rows."""
    jobs, events = job_rows(client_id, count, fields)
    engine = make_engine(database_url, pool_size=2)
    try:
        async with engine.begin() as conn:
            for start in range(0, len(jobs), BATCH):
                await conn.execute(insert(JOBS), jobs[start : start + BATCH])
            for start in range(0, len(events), 2 * BATCH):
                await conn.execute(insert(JOB_EVENTS), events[start : start + 2 * BATCH])
    finally:
        await engine.dispose()
    return jobs
