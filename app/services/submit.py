"""Saving submitted jobs in group commits (DESIGN.md rule 17).

Concurrent single submits share one transaction: one multi-row INSERT each for their jobs, their `created`
audit rows and their outbox rows. Right after the commit the batch's messages are published with their confirms
awaited together through the outbox, while the next batch fills; the outbox then moves the confirmed jobs
pending -> queued in a group commit of its own, off the request's path.
"""

import asyncio
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from loguru import logger
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core import metrics
from app.core.broker import Outgoing
from app.core.database import is_unreachable
from app.core.failpoints import Failpoint, Failpoints
from app.core.group_commit import GroupCommit
from app.core.messages import JobMessage, job_event, job_outgoing
from app.core.names import Names
from app.core.secret_box import SecretBox
from app.core.statuses import JobStatus, TrailEvent
from app.models.rows import JobRow, TrailRow, job_with
from app.models.tables import JOBS
from app.models.types import utcnow
from app.schemas.flow import flow_columns
from app.schemas.job import JobOptions
from app.schemas.unique import unique_columns
from app.services.outbox import Outbox
from app.services.payload_secrets import NO_KEY, sealed
from app.stores.flow.fair import LaneRef
from app.stores.jobs import JobStore, NewJobs
from app.stores.outbox import Pending

if TYPE_CHECKING:
    from app.services.fairness import Fairness

# RETURNING makes SQLAlchemy send a list of rows as one multi-row INSERT ("insertmanyvalues", paged to fit each
# driver's parameter limit) rather than one statement per row, on every dialect.
INSERT_JOBS = insert(JOBS).returning(JOBS.c.id, sort_by_parameter_order=True)
MAX_SUBMITS_PER_COMMIT = 256

Published = dict[str, bool]  # job id -> whether the broker confirmed its message


def as_queued(job: JobRow, now: datetime | None = None) -> JobRow:
    """A confirmed job as it is about to be: queued."""
    return job_with(job, status=str(JobStatus.QUEUED), seq=job["seq"] + 1, updated_at=now or utcnow())


def request_hash(request: JobOptions) -> str:
    """What "the same request" means: these six fields, canonically serialised."""
    fields = request.model_dump(mode="json", include={"job_type", "payload", "priority", "max_retries"})
    fields.update(callback_url=request.callback_url, timeout_seconds=request.timeout_seconds)
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Draft:
    """One job about to be saved: its row, its message, and its place in the caller's request."""

    index: int
    job: JobRow
    message: Outgoing

    @property
    def key(self) -> str | None:
        return self.job["idempotency_key"]

    @property
    def unique(self) -> str | None:
        """The unique key this job would hold (services/uniqueness.py)."""
        return self.job["unique_live"]

    @property
    def digest(self) -> str:
        return self.job["request_hash"] or ""

    @property
    def scheduled(self) -> bool:
        """Saved to wait for its time: its outbox row is the `job.scheduled` event; the scheduler queues it."""
        return self.job["status"] == JobStatus.SCHEDULED

    @property
    def dormant(self) -> bool:
        """Saved to wait for its time or for its dependencies (a workflow's `waiting` job): no lane message yet."""
        return self.job["status"] in (JobStatus.SCHEDULED, JobStatus.WAITING)

    @property
    def waits(self) -> bool:
        """Saved to wait in the database, for its time, its dependencies or its client's turn
        (services/fairness.py): its outbox row is an event, and saving it is all its submit needs."""
        return self.dormant or self.job["held"] is not None


def new_drafts(
    names: Names, client_id: str, requests: Sequence[JobOptions], request_id: str | None, box: SecretBox = NO_KEY
) -> list[Draft]:
    """The rows and messages of one request's jobs; a microsecond apart, so newest-first lists keep their order.
    `box` seals the credentials a payload holds."""
    start = utcnow()
    drafts = []
    for index, request in enumerate(requests):
        at = start + timedelta(microseconds=index)
        job = new_job_row(client_id, request, request_id, at, box)
        message = job_event(names, job, at) if job["status"] == JobStatus.SCHEDULED else None
        drafts.append(Draft(index, job, message or job_outgoing(names, JobMessage.from_row(job))))
    return drafts


def due_at(request: JobOptions, now: datetime) -> datetime | None:
    """When a job that asked to wait is due; None for one to run now (a run_at in the past runs now)."""
    if request.delay_seconds is not None:
        return now + timedelta(seconds=request.delay_seconds)
    if request.run_at is not None and request.run_at > now:
        return request.run_at.astimezone(UTC)
    return None


def new_job_row(
    client_id: str, request: JobOptions, request_id: str | None, now: datetime, box: SecretBox = NO_KEY
) -> JobRow:
    """A new job's full row: `pending` until the broker confirms its message, or `scheduled` (pending ->
    scheduled as it is saved) until its time. Its payload's credentials sealed, `***` in their place; the request's
    hash is of the request as sent, so the same request sent again is the same job."""
    due = due_at(request, now)
    payload, sealed_credentials = sealed(request.job_type, request.payload.model_dump(mode="json"), box)
    return {
        "id": str(uuid.uuid4()),
        "client_id": client_id,
        "job_type": request.job_type,
        "status": JobStatus.PENDING if due is None else JobStatus.SCHEDULED,
        "priority": request.priority,
        "max_retries": request.max_retries,
        "timeout_seconds": request.timeout_seconds,
        "attempts": 0,
        "runs": 0,
        "seq": 0 if due is None else 1,
        "payload": payload,
        "sealed": sealed_credentials,
        "result": None,
        "error": None,
        "dead_reason": None,
        "failure_group": None,
        "idempotency_key": request.idempotency_key,
        "request_hash": request_hash(request),
        "callback_url": request.callback_url,
        "request_id": request_id,
        "lease_until": None,
        "next_attempt_at": due,
        "created_at": now,
        "updated_at": now,
        "started_at": None,
        "finished_at": None,
        "run_at": due or (request.run_at.astimezone(UTC) if request.run_at else None),
        "held": None,
        **flow_columns(request.concurrency, request.rate_limit),
        "workflow_id": None,
        "ref": None,
        "depends_on": None,
        "deps_left": None,
        **unique_columns(request.unique),
        "progress": None,
        "cancel_requested_at": None,
    }


async def insert_drafts(store: JobStore, conn: AsyncConnection, drafts: Sequence[Draft]) -> list[Pending]:
    """Jobs, their `created` audit rows and their outbox rows: one statement on PostgreSQL, one statement each
    elsewhere, in the caller's transaction (or, on PostgreSQL, alone as a transaction of its own)."""
    trail = {"from": None, "to": str(JobStatus.PENDING), "attempt": 0}
    events: list[TrailRow] = [
        {"job_id": d.job["id"], "event": TrailEvent.CREATED, "detail": trail, "created_at": d.job["created_at"]}
        for d in drafts
    ]
    for d in drafts:
        job_id, to, at = d.job["id"], d.job["status"], d.job["created_at"]
        if d.waits:  # pending -> scheduled or waiting, or pending -> queued and held for its turn
            step = {"from": str(JobStatus.PENDING), "to": str(to), "attempt": 0}
            events.append({"job_id": job_id, "event": to, "detail": step, "created_at": at})
        if d.job["held"] is not None:
            held = {"reason": d.job["held"]}
            events.append({"job_id": job_id, "event": TrailEvent.HELD, "detail": held, "created_at": at})
    # A job message's row queues its job once published; a waiting job's row is an event, like any other.
    owners = [None if d.waits else d.job["id"] for d in drafts]
    return await store.save(conn, NewJobs([d.job for d in drafts], events, [d.message for d in drafts], owners))


@dataclass(frozen=True)
class Filed:
    """What one flush did with one request: all of its new jobs saved, or none of them."""

    inserted: list[Draft] = field(default_factory=list)
    # index -> a job another request of the same flush saved under the same key, for the same request
    repeats: dict[int, JobRow] = field(default_factory=dict)
    # an item whose key another request of the same flush holds for a different request: nothing saved
    conflict: Draft | None = None
    publishing: "asyncio.Task[Published] | None" = None

    async def published(self) -> Published:
        """Wait for this flush's publish (shielded: one caller leaving must not cancel it for the others)."""
        return await asyncio.shield(self.publishing) if self.publishing is not None else {}


def plan(orders: Sequence[list[Draft]]) -> list[Filed]:
    """Who inserts what in one flush: the first request with a (client, key) inserts it, a later one with the
    same request gets that job, a later one with another request a conflict (and saves nothing at all). A unique
    key (services/uniqueness.py) the same, but any request under it gets the job that holds it."""
    holders: dict[tuple[str, str, str], Draft] = {}
    filed = []
    for drafts in orders:
        mine: dict[tuple[str, str, str], Draft] = {}
        repeats: dict[int, JobRow] = {}
        conflict = None
        for draft in drafts:
            slots = _slots(draft)
            holder = next((held for one in slots if (held := holders.get(one)) is not None), None)
            if holder is None:
                mine.update(dict.fromkeys(slots, draft))
            elif holder.digest == draft.digest or _shares_unique(holder, draft):
                repeats[draft.index] = holder.job
            else:
                conflict = draft
                break
        if conflict is not None:
            filed.append(Filed(conflict=conflict))
            continue
        holders.update(mine)
        filed.append(Filed([d for d in drafts if d.index not in repeats], repeats))
    return filed


def _slots(draft: Draft) -> list[tuple[str, str, str]]:
    """The keys a draft takes in a flush: its idempotency key first, then its unique key."""
    client = draft.job["client_id"]
    keys = (("idempotency", draft.key), ("unique", draft.unique))
    return [(client, kind, key) for kind, key in keys if key is not None]


def _shares_unique(holder: Draft, draft: Draft) -> bool:
    return draft.unique is not None and holder.unique == draft.unique


class Submitter:
    """Saves requests' jobs, then publishes them: singles through one group commit, batches on their own."""

    def __init__(
        self, store: JobStore, outbox: Outbox, failpoints: Failpoints | None = None, fairness: "Fairness | None" = None
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._failpoints = failpoints or Failpoints()
        self._fairness = fairness
        self._publishing: set[asyncio.Task[Any]] = set()
        self.commit: GroupCommit[list[Draft], Filed] = GroupCommit(
            "submits", self._flush, MAX_SUBMITS_PER_COMMIT, systemic=is_unreachable
        )

    async def file(self, drafts: list[Draft]) -> Filed:
        """Save one request's new jobs, all or none; an IntegrityError means a key was taken meanwhile."""
        if len(drafts) > 1:
            # A batch is a group commit of its own; sharing it would make every single submit wait on 500 rows.
            return (await self._flush([drafts]))[0]
        return await self.commit.run(drafts)

    async def _flush(self, orders: list[list[Draft]]) -> list[Filed]:
        filed = plan(orders)
        fresh = [draft for one in filed for draft in one.inserted]
        if not fresh:
            return filed
        refill: list[LaneRef] = []
        if self._fairness is not None:  # each client's jobs beyond its share of a lane wait their turn
            fresh, refill = await self._fairness.admit(fresh)
            turned = {draft.job["id"]: draft for draft in fresh}
            filed = [replace(one, inserted=[turned[d.job["id"]] for d in one.inserted]) for one in filed]
        async with self._store.one_transaction() as conn:  # on PostgreSQL the save is one statement
            staged = await insert_drafts(self._store, conn, fresh)
        self._failpoints.hit(Failpoint.AFTER_SUBMIT_COMMIT)
        metrics.count_submitted((d.job["job_type"], d.job["client_id"], d.job["priority"]) for d in fresh)
        task = asyncio.create_task(self._publish(list(zip(fresh, staged, strict=True))), name="submit-publish")
        self._track(task)
        if refill:
            self._track(asyncio.create_task(self._refill(task, refill), name="submit-refill"))
        return [replace(one, publishing=task) for one in filed]

    def _track(self, task: "asyncio.Task[Any]") -> None:
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    async def _refill(self, publishing: "asyncio.Task[Published]", refill: list["LaneRef"]) -> None:
        """After the flush's own messages: the older jobs of its clients that wait their turn and have room."""
        await asyncio.gather(publishing, return_exceptions=True)
        assert self._fairness is not None
        try:
            await self._fairness.release(refill)
        except Exception as exc:  # the held_release sweep releases them within a pass
            logger.warning("releasing jobs waiting their turn failed; the held_release loop will: {}", exc)

    async def _publish(self, saved: list[tuple[Draft, Pending]]) -> Published:
        try:
            confirmed = await self._outbox.publish([staged for _, staged in saved])
        except Exception:  # the rows are committed: whatever went wrong here, the relay publishes them
            logger.exception("publishing {} saved job(s) failed", len(saved))
            confirmed = [False] * len(saved)
        unconfirmed = sum(1 for (draft, _), ok in zip(saved, confirmed, strict=True) if not ok and not draft.waits)
        if unconfirmed:
            logger.warning("{} job(s) saved as pending, the relay will publish them", unconfirmed)
        return {draft.job["id"]: ok for (draft, _), ok in zip(saved, confirmed, strict=True)}

    async def close(self) -> None:
        """Flush what is waiting and let the publishes in flight finish."""
        await self.commit.close()
        await asyncio.gather(*self._publishing, return_exceptions=True)
