"""Jobs as the API serves them: submit (save, publish, confirm), read, list, audit trail."""

import hashlib
import json
import uuid
from dataclasses import dataclass
from enum import StrEnum

from loguru import logger
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker, PublishError
from app.core.messages import JobMessage, job_outgoing
from app.core.names import Names
from app.core.statuses import JobStatus
from app.models.tables import JOB_EVENTS as EVENTS
from app.models.tables import JOBS
from app.models.types import utcnow
from app.schemas.job import JobOptions
from app.services import outbox as outbox_rows
from app.services.confirmations import Confirmations
from app.services.idempotency import IdempotencyCache
from app.services.outbox import Outbox, Pending
from app.services.pagination import newest_first
from app.services.tenancy import Principal, visible_to
from app.services.transitions import Row, audit

INSERT_JOB = insert(JOBS)


class Submitted(StrEnum):
    CREATED = "created"  # saved and confirmed by the broker
    PENDING = "pending"  # saved; the relay publishes it once the broker confirms
    EXISTING = "existing"  # the same request under the same idempotency key: nothing new


class IdempotencyConflict(Exception):
    """The idempotency key was used before for a different request."""


def request_hash(request: JobOptions) -> str:
    """What "the same request" means: these six fields, canonically serialised."""
    fields = request.model_dump(mode="json", include={"job_type", "payload", "priority", "max_retries"})
    fields.update(callback_url=request.callback_url, timeout_seconds=request.timeout_seconds)
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass
class JobService:
    """What the jobs API needs, created once at start-up."""

    engine: AsyncEngine
    broker: Broker
    outbox: Outbox
    names: Names
    idempotency: IdempotencyCache | None = None

    def __post_init__(self) -> None:
        self.confirmations = Confirmations(self.engine, self.outbox, self.names)

    async def submit(self, principal: Principal, request: JobOptions, request_id: str | None) -> tuple[Row, Submitted]:
        """Save the job and stage its message, then publish it; say how far it got."""
        digest = request_hash(request)
        key = request.idempotency_key
        if key and (earlier := await self._seen_before(principal, key, digest)):
            return earlier, Submitted.EXISTING
        try:
            job, staged = await self._save(principal, request, request_id, digest)
        except IntegrityError:
            # Another submit with the same key won the race; the unique index is the safety net.
            earlier = await self._earlier(principal, key or "", digest)
            if earlier is None:
                raise
            return earlier, Submitted.EXISTING
        if key and self.idempotency is not None:
            await self.idempotency.remember(principal.client_id, key, digest, job["id"])
        try:
            await self.broker.publish(staged.message)
        except PublishError as exc:
            logger.warning("job {} saved as pending, the relay will publish it: {}", job["id"], exc)
            return job, Submitted.PENDING
        return self.confirmations.add(job, staged), Submitted.CREATED

    async def _seen_before(self, principal: Principal, key: str, digest: str) -> Row | None:
        """Redis first (one round trip when the key is new); the database when Redis knows of a request."""
        if self.idempotency is None:
            return await self._earlier(principal, key, digest)
        seen = await self.idempotency.claim(principal.client_id, key, digest)
        if seen is None:
            return None  # ours now, or Redis is down: the unique index still catches a duplicate
        if seen.digest != digest:
            raise IdempotencyConflict(key)
        if seen.job_id and (job := await self.get(principal, seen.job_id)):
            return job
        return await self._earlier(principal, key, digest)  # the other request is still being saved

    async def _earlier(self, principal: Principal, key: str, digest: str) -> Row | None:
        query = select(JOBS).where(JOBS.c.client_id == principal.client_id, JOBS.c.idempotency_key == key)
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            return None
        if row.request_hash != digest:
            raise IdempotencyConflict(key)
        return dict(row._mapping)

    async def _save(
        self, principal: Principal, request: JobOptions, request_id: str | None, digest: str
    ) -> tuple[Row, Pending]:
        now = utcnow()
        job: Row = {
            "id": str(uuid.uuid4()),
            "client_id": principal.client_id,
            "job_type": request.job_type,
            "status": str(JobStatus.PENDING),
            "priority": request.priority,
            "max_retries": request.max_retries,
            "timeout_seconds": request.timeout_seconds,
            "attempts": 0,
            "runs": 0,
            "seq": 0,
            "payload": request.payload.model_dump(mode="json"),
            "result": None,
            "error": None,
            "dead_reason": None,
            "idempotency_key": request.idempotency_key,
            "request_hash": digest,
            "callback_url": request.callback_url,
            "request_id": request_id,
            "lease_until": None,
            "next_attempt_at": None,
            "created_at": now,
            "updated_at": now,
            "started_at": None,
            "finished_at": None,
        }
        message = job_outgoing(self.names, JobMessage.from_row(job))
        async with self.engine.begin() as conn:
            await conn.execute(INSERT_JOB, job)
            await audit(conn, job["id"], "created", {"from": None, "to": job["status"], "attempt": 0}, now)
            staged = await outbox_rows.add(conn, message, job_id=job["id"])
        return job, staged

    async def get(self, principal: Principal, job_id: str) -> Row | None:
        """The job, if it exists and the caller may see it."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(JOBS).where(JOBS.c.id == job_id, visible_to(JOBS, principal)))).first()
        return dict(row._mapping) if row else None

    async def page(
        self, principal: Principal, status: str | None, job_type: str | None, limit: int, cursor: str | None
    ) -> tuple[list[Row], Row | None]:
        """Newest first; returns the page and the last row when more may follow."""
        query = select(JOBS).where(visible_to(JOBS, principal))
        if status:
            query = query.where(JOBS.c.status == status)
        if job_type:
            query = query.where(JOBS.c.job_type == job_type)
        return await newest_first(self.engine, JOBS, query, limit, cursor)

    async def events(self, principal: Principal, job_id: str) -> list[Row] | None:
        """The job's audit trail, oldest first; None when the job is not the caller's."""
        if await self.get(principal, job_id) is None:
            return None
        query = select(EVENTS.c.event, EVENTS.c.detail, EVENTS.c.created_at).where(EVENTS.c.job_id == job_id)
        async with self.engine.connect() as conn:
            return [dict(r._mapping) for r in await conn.execute(query.order_by(EVENTS.c.id))]
