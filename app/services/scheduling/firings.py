"""Recurring schedules firing: one transaction per batch takes the due schedules (a claim two schedulers cannot
both win), moves each to its next firing and saves the job each firing makes, under the idempotency key
`schedule:<id>:<fire time>` that the jobs' unique index holds to one job per firing. A firing over its client's
rate limit waits: its schedule is left as it was, still due (services/scheduling/firing_limits.py)."""

from datetime import datetime

from loguru import logger
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core import metrics
from app.core.cron import BadCron, BadTimezone, next_fire
from app.core.names import Names
from app.core.secret_box import SecretBox
from app.models.rows import ScheduleRow
from app.models.types import utcnow
from app.schemas.job import JOB_REQUEST, JobOptions
from app.services import uniqueness
from app.services.outbox import Outbox
from app.services.payload_secrets import NO_KEY, opened_job
from app.services.scheduling.firing_limits import FiringLimits
from app.services.submit import Draft, insert_drafts, new_drafts
from app.stores.jobs import JobStore
from app.stores.schedules import Firing, ScheduleStore


def firing_key(schedule_id: str, fire_at: datetime) -> str:
    """The idempotency key of one firing: the same firing is the same key, whichever process makes it."""
    return f"schedule:{schedule_id}:{fire_at.strftime('%Y-%m-%dT%H:%M:%SZ')}"


def firing_request(schedule: ScheduleRow, fire_at: datetime, box: SecretBox = NO_KEY) -> JobOptions:
    """The job request one firing submits: the schedule's own, its credentials opened, under the firing's key."""
    job = opened_job(schedule, box)
    return JOB_REQUEST.validate_python({**job, "idempotency_key": firing_key(schedule["id"], fire_at)})


def plan(schedule: ScheduleRow, now: datetime) -> Firing:
    """Fire once for the stored time, however many periods have passed since; the next firing comes after now."""
    fire_at = schedule["next_run_at"]
    if fire_at is None:  # the due claim takes only schedules with a time that has come
        raise ValueError(f"schedule {schedule['id']} has no time to fire at")
    try:
        following: datetime | None = next_fire(schedule["cron"], schedule["timezone"], max(now, fire_at))
    except (BadCron, BadTimezone) as exc:  # checked when saved; a time zone dropped from tzdata stops it here
        logger.error("schedule {} cannot compute its next firing: {}", schedule["id"], exc)
        following = None
    return Firing(schedule, fire_at, following)


async def fire_due(
    schedules: ScheduleStore,
    jobs: JobStore,
    names: Names,
    outbox: Outbox,
    limit: int,
    limits: FiringLimits,
    box: SecretBox = NO_KEY,
) -> int:
    """Fire up to `limit` due schedules, each once, as their clients' rate limits allow; publish their jobs after
    the commit. Returns how many schedules it took (fired, or found fired already)."""
    now, held = utcnow(), limits.held_clients()
    if not await schedules.any_due(now, held):  # most cycles find nothing due: a read, not a locking transaction
        return 0
    async with jobs.transaction() as conn:  # the schedules' moves and the jobs their firings make, together
        firings = [plan(schedule, now) for schedule in await schedules.claim_due(conn, now, limit, held)]
        drafts = await _new_jobs(schedules, conn, names, firings, box) if firings else []
        allowed = await limits.allowed(drafts)
        waiting = {d.key for d in drafts if d.key not in allowed}
        firings = [f for f in firings if firing_key(f.schedule["id"], f.fire_at) not in waiting]
        if not firings:
            return 0
        taken = await schedules.advance(conn, firings, now)
        mine = [f for f in firings if f.schedule["id"] in taken]
        keys = {firing_key(f.schedule["id"], f.fire_at) for f in mine}
        staged = await insert_drafts(jobs, conn, [d for d in drafts if d.key in keys]) if mine else []
    for firing in mine:  # fired when committed: the lag is counted then, not after the publish
        metrics.scheduler_lag(metrics.RECURRING).observe(max(0.0, (now - firing.fire_at).total_seconds()))
    await outbox.publish(staged)
    return len(mine)


async def _new_jobs(
    schedules: ScheduleStore, conn: AsyncConnection, names: Names, firings: list[Firing], box: SecretBox
) -> list[Draft]:
    """A draft per firing that has no job yet (a trigger or an earlier run may have made it), and whose unique
    key no job holds: such a firing makes nothing, as a submit would."""
    drafts = []
    for firing in firings:
        try:
            request = firing_request(firing.schedule, firing.fire_at, box)
        except ValidationError as exc:  # checked when saved; a job type since removed, say
            logger.error("schedule {} holds a job request no longer valid: {}", firing.schedule["id"], exc)
            continue
        drafts += new_drafts(names, firing.schedule["client_id"], [request], None, box)
    existing = await schedules.fired(conn, [d.key for d in drafts if d.key is not None])
    return await uniqueness.free(conn, [d for d in drafts if (d.job["client_id"], d.key) not in existing])
