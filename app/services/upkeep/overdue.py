"""The net under the delay tiers: re-publish `retrying` jobs whose time is long past (rule 6). A held one waits in
the database by design (rule 18): its release sends it."""

from datetime import timedelta

from loguru import logger
from sqlalchemy import select, update

from app.core.broker import Broker
from app.core.messages import JobMessage, job_outgoing
from app.core.resources import Resources
from app.core.statuses import JobStatus
from app.models.tables import JOBS
from app.models.types import utcnow

BATCH = 100


def grace_seconds(resources: Resources) -> float:
    """How late a retry may be before we assume its message was lost: well past the longest tier."""
    return 60 + 1.2 * resources.settings.retry_max_delay


async def republish_overdue(resources: Resources, broker: Broker | None = None) -> int:
    """Publish the lane message of every long-overdue retrying job again; workers drop duplicates."""
    broker = broker or resources.broker
    now = utcnow()
    cutoff = now - timedelta(seconds=grace_seconds(resources))
    query = (
        select(JOBS)
        .where(JOBS.c.status == JobStatus.RETRYING, JOBS.c.next_attempt_at < cutoff, JOBS.c.held.is_(None))
        .order_by(JOBS.c.next_attempt_at)
        .limit(BATCH)
    )
    async with resources.engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    if not rows:
        return 0
    messages = [job_outgoing(resources.names, JobMessage.from_row(row), row["attempts"]) for row in rows]
    results = await broker.publish_many(messages)
    sent = [row["id"] for row, error in zip(rows, results, strict=True) if error is None]
    if sent:
        # Not a status change: just note when we last pushed it, so the next push waits another grace period.
        async with resources.engine.begin() as conn:
            await conn.execute(
                update(JOBS).where(JOBS.c.id.in_(sent), JOBS.c.status == JobStatus.RETRYING).values(next_attempt_at=now)
            )
        logger.warning("re-published {} overdue retrying job(s)", len(sent))
    return len(sent)
