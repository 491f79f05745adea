"""One action on many jobs: each job through the very service call its single route makes, in its own transaction,
with the caller's tenancy checked per job."""

import asyncio

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.statuses import JobStatus
from app.models.tables import JOBS
from app.schemas.bulk import BulkAction, BulkItemOut, BulkOutcome
from app.services.dlq import DlqService, NotCancellable, NotDeadLettered
from app.services.tenancy import Principal, visible_to

# Jobs acted on at once: each is a short transaction and a confirmed publish, so a few in flight hide the waits
# without taking more than a few of the pool's connections.
IN_FLIGHT = 4
STATUSES = {str(s) for s in JobStatus}
NUL = "\x00"  # PostgreSQL cannot compare a text holding one: no job's id does


async def apply(dlq: DlqService, principal: Principal, action: BulkAction, job_ids: list[str]) -> list[BulkItemOut]:
    """What became of each distinct id, in the order first given."""
    ids = list(dict.fromkeys(job_ids))
    known = await _visible(dlq.engine, principal, ids)
    gate = asyncio.Semaphore(IN_FLIGHT)
    one = _cancel if action is BulkAction.CANCEL else _retry

    async def gated(job_id: str) -> BulkItemOut:
        if job_id not in known:
            return BulkItemOut(job_id=job_id, outcome=BulkOutcome.NOT_FOUND)
        async with gate:
            return await one(dlq, principal, job_id)

    return list(await asyncio.gather(*(gated(job_id) for job_id in ids)))


async def _visible(engine: AsyncEngine, principal: Principal, ids: list[str]) -> set[str]:
    """Which of the ids name a job the caller may see, in one statement: an id that names none (a typo, another
    client's job) costs no transaction of its own. The single calls check again, as each job may go meanwhile."""
    wanted = [job_id for job_id in ids if NUL not in job_id]
    if not wanted:
        return set()
    query = select(JOBS.c.id).where(JOBS.c.id.in_(wanted), visible_to(JOBS, principal))
    async with engine.connect() as conn:
        return set((await conn.execute(query)).scalars())


async def _cancel(dlq: DlqService, principal: Principal, job_id: str) -> BulkItemOut:
    try:
        cancel = await dlq.cancel(principal, job_id)
    except NotCancellable as exc:
        status = str(exc) if str(exc) in STATUSES else None
        return BulkItemOut(job_id=job_id, outcome=BulkOutcome.CONFLICT, status=status)
    if cancel is None:
        return BulkItemOut(job_id=job_id, outcome=BulkOutcome.NOT_FOUND)
    outcome = BulkOutcome.CANCEL_REQUESTED if cancel.requested else BulkOutcome.CANCELLED
    return BulkItemOut(job_id=job_id, outcome=outcome, status=cancel.job["status"])


async def _retry(dlq: DlqService, principal: Principal, job_id: str) -> BulkItemOut:
    try:
        job = await dlq.retry(principal, job_id)
    except NotDeadLettered as exc:
        return BulkItemOut(job_id=job_id, outcome=BulkOutcome.CONFLICT, status=exc.status)
    if job is None:
        return BulkItemOut(job_id=job_id, outcome=BulkOutcome.NOT_FOUND)
    return BulkItemOut(job_id=job_id, outcome=BulkOutcome.REPLAYED, status=job["status"])
