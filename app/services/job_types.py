"""The job types as operators steer them (docs/flow-control.md): each type with its description, whether it is
paused and how many of the caller's jobs wait or run; pausing and resuming a type; and the release that sends the
jobs a pause held back to their lanes again once their type is resumed.

A pause is a row in the database, so it outlives every process. The job workers read the paused types about
once a second and hold a paused type's jobs in the database as their messages arrive (workers/jobs/holds.py,
DESIGN.md rule 18); `release_held`, a background loop of every process and run once at once by a resume, releases
them. It is level-triggered: a hold that committed after a resume's release (a worker that had not yet read the
resume) is released by the next pass."""

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from loguru import logger

from app.core.statuses import HeldReason, JobStatus
from app.models.types import utcnow
from app.schemas.payloads.registry import PAYLOADS
from app.services.outbox import Outbox
from app.services.tenancy import Principal
from app.stores.job_types import Counts, JobTypeStore
from app.stores.jobs import JobStore

S = JobStatus
WAITING = (S.PENDING, S.QUEUED)  # a type's `queued` count: its jobs waiting for a worker (held ones too)
COUNTED = (*WAITING, S.RUNNING)
RELEASE_BATCH = 200  # jobs per release statement: its outbox rows stay within MSSQL's 2,100 parameters
MAX_BATCHES_PER_CYCLE = 10  # a full batch means more may be held: go on, within one pass at most this many


class UnknownJobType(LookupError):
    """No job type has that name."""


@dataclass(frozen=True)
class JobTypeState:
    """One job type as `GET /api/v1/job-types` shows it."""

    name: str
    description: str
    paused: bool
    queued: int  # the caller's jobs of this type waiting to start (pending or queued), held ones included
    running: int
    payload_schema: dict[str, Any]  # the JSON Schema of its payload, as OpenAPI shows it under JobRequest


@dataclass
class JobTypeService:
    types: JobTypeStore
    jobs: JobStore
    outbox: Outbox

    async def states(self, principal: Principal) -> list[JobTypeState]:
        """Every job type, by name, with the caller's counts (an admin's: every client's)."""
        paused = await self.types.paused()
        counts = await self.types.counts(None if principal.admin else principal.client_id, COUNTED)
        return [_state(name, name in paused, counts) for name in sorted(PAYLOADS)]

    async def state(self, principal: Principal, job_type: str) -> JobTypeState:
        """One job type as `states` shows it; UnknownJobType when there is none of that name."""
        _known(job_type)
        return next(state for state in await self.states(principal) if state.name == job_type)

    async def pause(self, principal: Principal, job_type: str) -> JobTypeState:
        """Pause a job type: within PAUSE_REFRESH_SECONDS no new job of it starts in any process (running ones
        finish); its jobs wait in the database, `queued`. Pausing a paused type changes nothing."""
        _known(job_type)
        await self.types.pause(job_type, utcnow())
        logger.warning("job type {} paused: its jobs wait in the database until it is resumed", job_type)
        return await self.state(principal, job_type)

    async def resume(self, principal: Principal, job_type: str) -> JobTypeState:
        """Resume a job type and release a first batch of its held jobs at once; the release loop sends the rest."""
        _known(job_type)
        await self.types.resume(job_type)
        logger.warning("job type {} resumed", job_type)
        try:
            await release_held(self.jobs, self.types, self.outbox, max_batches=1)
        except Exception as exc:  # the resume is committed: the release loop of every process sends them
            logger.warning("releasing {}'s jobs failed; the release loop will send them: {}", job_type, exc)
        return await self.state(principal, job_type)


async def release_held(
    jobs: JobStore, types: JobTypeStore, outbox: Outbox, max_batches: int = MAX_BATCHES_PER_CYCLE
) -> int:
    """One pass of the release: the held jobs whose type is not paused any more, each released by one
    compare-and-set with its lane message staged in the same transaction, then published (what the broker does
    not confirm, the outbox relay sends). Returns how many were released."""
    paused = await types.paused()
    released = 0
    for name in sorted(PAYLOADS):  # a type at a time: its held jobs in the index's order, each batch stops early
        if name not in paused:
            released += await _release(jobs, outbox, [name], max_batches, HeldReason.PAUSED)
    if released:
        logger.info("released {} held job(s) to their lanes", released)
    return released


async def release_unknown(jobs: JobStore, outbox: Outbox, known: Iterable[str]) -> int:
    """One pass of a job worker's release of the jobs that workers without their type held (docs/plugins.md), of
    the types it has, `known` (not paused): one read when there are none, as on most passes. Returns how many."""
    released = await _release(jobs, outbox, sorted(known), MAX_BATCHES_PER_CYCLE, HeldReason.UNKNOWN_TYPE)
    if released:
        logger.info("released {} job(s) held for a type their worker lacked to their lanes", released)
    return released


def _known(job_type: str) -> None:
    if job_type not in PAYLOADS:
        raise UnknownJobType(job_type)


def _state(name: str, paused: bool, counts: Counts) -> JobTypeState:
    queued = sum(counts.get((name, status), 0) for status in WAITING)
    running = counts.get((name, S.RUNNING), 0)
    return JobTypeState(name, PAYLOADS[name].description, paused, queued, running, payload_schema(name))


@cache
def payload_schema(name: str) -> dict[str, Any]:
    """The JSON Schema of a job type's payload (a built-in's or a plugin's)."""
    return PAYLOADS[name].model.model_json_schema()


async def _release(jobs: JobStore, outbox: Outbox, job_types: list[str], max_batches: int, reason: HeldReason) -> int:
    released = 0
    for _ in range(max_batches):
        held, staged = await jobs.release(job_types, RELEASE_BATCH, reason)
        await outbox.publish(staged)
        released += len(held)
        if len(held) < RELEASE_BATCH:
            break
    return released
