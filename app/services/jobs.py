"""Jobs as the API serves them: submit (idempotency, save, publish), read, list, audit trail."""

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import cast

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.failpoints import Failpoints
from app.core.messages import expecting_reply
from app.core.names import Names
from app.core.secret_box import SecretBox
from app.models.rows import JobRow, TrailEntry, job_row
from app.models.tables import JOB_EVENTS as EVENTS
from app.models.tables import JOBS
from app.schemas.job import JobOptions, Submitted
from app.services import uniqueness
from app.services.fairness import Fairness
from app.services.idempotency import IdempotencyCache, IdempotencyConflict, Seen, earlier_jobs, repeated_keys
from app.services.job_search import JobSearch, conditions
from app.services.outbox import Outbox
from app.services.payload_secrets import NO_KEY
from app.services.submit import Draft, Filed, Submitter, as_queued, new_drafts, request_hash
from app.services.tenancy import Principal, visible_to
from app.stores.jobs import JobStore
from app.stores.pagination import newest_first

__all__ = ["IdempotencyConflict", "JobService", "Submitted", "request_hash"]


Outcomes = dict[int, tuple[JobRow, Submitted]]  # item index -> the job and how far it got
# Inserts a unique key may take: one another submit's job took it meanwhile, or a job that held it then let it go.
SAVE_TRIES = 3


@dataclass
class JobService:
    """What the jobs API needs, created once at start-up."""

    engine: AsyncEngine
    store: JobStore
    outbox: Outbox
    names: Names
    idempotency: IdempotencyCache | None = None
    failpoints: Failpoints = field(default_factory=Failpoints)
    box: SecretBox = NO_KEY  # seals the credentials a payload holds
    fairness: Fairness | None = None  # each client's turns in a lane (None: a lane is one queue)

    def __post_init__(self) -> None:
        self.submitter = Submitter(self.store, self.outbox, self.failpoints, self.fairness)

    async def submit(
        self, principal: Principal, request: JobOptions, request_id: str | None, reply_id: str | None = None
    ) -> tuple[JobRow, Submitted]:
        """Save the job and stage its message, then publish it; say how far it got. With `reply_id`, the worker
        replies to this process under that correlation id once the job is finished (direct reply-to)."""
        return (await self.submit_many(principal, [request], request_id, reply_id))[0]

    async def submit_many(
        self,
        principal: Principal,
        requests: Sequence[JobOptions],
        request_id: str | None,
        reply_id: str | None = None,
    ) -> list[tuple[JobRow, Submitted]]:
        """Save every job of one request or none, then publish them with their confirms awaited together; return
        each job and how far it got, in request order. An idempotency key used for another request raises; a
        unique key held makes nothing new (services/uniqueness.py)."""
        client = principal.client_id
        drafts = new_drafts(self.names, client, requests, request_id, self.box)
        if reply_id is not None:
            drafts = [d if d.scheduled else replace(d, message=expecting_reply(d.message, reply_id)) for d in drafts]
        repeats = repeated_keys(drafts)
        repeats |= uniqueness.repeated(drafts, repeats)
        first = [d for d in drafts if d.index not in repeats]
        keyed = [d for d in first if d.key is not None]
        seen = await self._claim(client, keyed)
        try:
            outcomes = await self._save_new(client, first, await self._known(client, keyed, seen))
        except Exception:
            await self._release(client, [d for d, held in zip(keyed, seen, strict=True) if held is None])
            raise
        if self.idempotency is not None:
            await self.idempotency.remember_many(client, [(d, outcomes[d.index][0]["id"]) for d in keyed])
        for index, earlier in repeats.items():
            outcomes[index] = (outcomes[earlier][0], Submitted.EXISTING)
        return [outcomes[d.index] for d in drafts]

    async def _claim(self, client_id: str, keyed: list[Draft]) -> list[Seen | None]:
        if self.idempotency is None:
            return [None] * len(keyed)
        return await self.idempotency.claim_many(client_id, keyed)

    async def _release(self, client_id: str, claimed: list[Draft]) -> None:
        if self.idempotency is not None:
            await self.idempotency.release(client_id, claimed)

    async def _known(self, client_id: str, keyed: list[Draft], seen: list[Seen | None]) -> dict[int, JobRow]:
        """Earlier jobs these keys name. Redis first (nothing more when the keys are new); the database when Redis
        knows of a request, or cannot say."""
        if self.idempotency is None:
            return await earlier_jobs(self.engine, client_id, keyed)
        asked = []
        for draft, held in zip(keyed, seen, strict=True):
            if held is None:
                continue  # ours now, or Redis is down: the unique index still catches a duplicate
            if held.digest != draft.digest:
                raise IdempotencyConflict.of(draft)
            asked.append(draft)
        return await earlier_jobs(self.engine, client_id, asked)  # a job still being saved is not there yet

    async def _save_new(self, client_id: str, drafts: list[Draft], known: dict[int, JobRow]) -> Outcomes:
        """Save the drafts no earlier job stands for; when the unique index finds one after all, take it and retry."""
        known = {**known, **await uniqueness.holders(self.engine, [d for d in drafts if d.index not in known])}
        tries = 0
        while new := [d for d in drafts if d.index not in known]:
            try:
                filed = await self.submitter.file(new)
            except IntegrityError:
                # Another submit saved one of these keys first (or Redis had forgotten it): an index caught it.
                tries += 1
                found = await self._taken(client_id, new)
                if not found and (tries == SAVE_TRIES or not any(d.unique for d in new)):
                    raise
                known = {**known, **found}
                continue
            if filed.conflict is not None:
                raise IdempotencyConflict.of(filed.conflict)
            return await _outcomes(filed, known)
        return {index: (row, Submitted.EXISTING) for index, row in known.items()}

    async def _taken(self, client_id: str, drafts: list[Draft]) -> dict[int, JobRow]:
        """The jobs that hold these drafts' idempotency or unique keys now."""
        found = await earlier_jobs(self.engine, client_id, drafts)
        return {**found, **await uniqueness.holders(self.engine, [d for d in drafts if d.index not in found])}

    async def close(self) -> None:
        """Finish the submits in flight (shutdown); the outbox's own close forgets what they published."""
        await self.submitter.close()

    async def get(self, principal: Principal, job_id: str) -> JobRow | None:
        """The job, if it exists and the caller may see it."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(JOBS).where(JOBS.c.id == job_id, visible_to(JOBS, principal)))).first()
        return job_row(row._mapping) if row else None

    async def page(
        self, principal: Principal, search: JobSearch, limit: int, cursor: str | None
    ) -> tuple[list[JobRow], str | None]:
        """The jobs `search` finds, newest first; returns the page and the cursor to the next one when more may
        follow."""
        query = select(JOBS).where(visible_to(JOBS, principal), *conditions(search))
        rows, after = await newest_first(self.engine, JOBS, query, limit, cursor, "jobs")
        return [job_row(row) for row in rows], after

    async def events(self, principal: Principal, job_id: str) -> list[TrailEntry] | None:
        """The job's audit trail, oldest first; None when the job is not the caller's."""
        if await self.get(principal, job_id) is None:
            return None
        query = select(EVENTS.c.event, EVENTS.c.detail, EVENTS.c.created_at).where(EVENTS.c.job_id == job_id)
        async with self.engine.connect() as conn:
            return [cast(TrailEntry, dict(r._mapping)) for r in await conn.execute(query.order_by(EVENTS.c.id))]


async def _outcomes(filed: Filed, known: dict[int, JobRow]) -> Outcomes:
    """Per item: an earlier job, or a new one (created once the broker confirmed it, pending if not)."""
    published = await filed.published()
    outcomes: Outcomes = {index: (row, Submitted.EXISTING) for index, row in {**known, **filed.repeats}.items()}
    for draft in filed.inserted:
        if draft.waits:
            outcomes[draft.index] = (draft.job, Submitted.CREATED)  # saved is all it needs: it waits in the DB
        elif published.get(draft.job["id"]):
            outcomes[draft.index] = (as_queued(draft.job), Submitted.CREATED)
        else:
            outcomes[draft.index] = (draft.job, Submitted.PENDING)
    return outcomes
