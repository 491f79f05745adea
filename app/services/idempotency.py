"""Idempotent submits: the same client, key and request is the same job, and nothing new is created.

Redis is the fast path: SET NX remembers (client, key) -> request and job, one round trip for all the keys of a
request. The database's filtered unique index is the net, so Redis being down changes nothing but speed."""

from collections.abc import Sequence
from dataclasses import dataclass

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.models.rows import JobRow, job_row
from app.models.tables import JOBS
from app.services.submit import Draft

PENDING = "-"  # the job is being created by whoever set the key
# A claim that never becomes a job (its process died) must not hold the key for a whole day.
PENDING_TTL_SECONDS = 60

# KEYS: one idempotency key. ARGV: the pending value its claimer set. Deletes it only if it still holds that.
RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class IdempotencyConflict(Exception):
    """The idempotency key was used before for a different request; `index` is the item's place in its request."""

    def __init__(self, key: str, index: int = 0) -> None:
        super().__init__(key)
        self.key, self.index = key, index

    @classmethod
    def of(cls, draft: Draft) -> "IdempotencyConflict":
        return cls(draft.key or "", draft.index)


@dataclass(frozen=True)
class Seen:
    """What Redis knows of an earlier request with this key: its request's digest (its job may still be saving)."""

    digest: str


@dataclass(frozen=True)
class IdempotencyCache:
    redis: Redis
    names: Names
    ttl_seconds: int

    async def claim_many(self, client_id: str, drafts: Sequence[Draft]) -> list[Seen | None]:
        """Take each draft's key for its request; per draft, None when it is ours (or Redis cannot say), else what
        holds it. The keys must be distinct."""
        if not drafts:
            return []
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for draft in drafts:
                    name = self._name(client_id, draft)
                    pipe.set(name, _pending(draft), nx=True, ex=PENDING_TTL_SECONDS)
                    pipe.get(name)
                replies = await pipe.execute()
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable for idempotency; the database alone decides: {}", exc)
            return [None] * len(drafts)
        return [None if took else _seen(value) for took, value in zip(replies[::2], replies[1::2], strict=True)]

    async def remember_many(self, client_id: str, saved: Sequence[tuple[Draft, str]]) -> None:
        """Record each key's job id (draft, job id), so later requests with it need no database read."""
        if not saved:
            return
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for draft, job_id in saved:
                    pipe.set(self._name(client_id, draft), f"{draft.digest}|{job_id}", ex=self.ttl_seconds)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable for idempotency: {}", exc)

    async def release(self, client_id: str, drafts: Sequence[Draft]) -> None:
        """Give back keys claimed for a request that saved nothing, so a corrected request may use them at once."""
        if not drafts:
            return
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for draft in drafts:
                    pipe.eval(RELEASE, 1, self._name(client_id, draft), _pending(draft))
                await pipe.execute()
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable for idempotency; claims expire in {} s: {}", PENDING_TTL_SECONDS, exc)

    def _name(self, client_id: str, draft: Draft) -> str:
        assert draft.key is not None
        return self.names.idempotency_key(client_id, draft.key)


def _pending(draft: Draft) -> str:
    return f"{draft.digest}|{PENDING}"


def _seen(value: object) -> Seen | None:
    if value is None:
        return None  # it expired between our SET and GET: ours, as far as anyone can tell
    text = value.decode() if isinstance(value, bytes) else str(value)
    return Seen(text.partition("|")[0])


def repeated_keys(drafts: Sequence[Draft]) -> dict[int, int]:
    """Items of one request that repeat an earlier item's key: index -> the earlier item's index.
    A repeat of the same request is that item's job; a different request under the same key is a conflict."""
    first: dict[str, Draft] = {}
    repeats: dict[int, int] = {}
    for draft in drafts:
        if draft.key is None:
            continue
        earlier = first.setdefault(draft.key, draft)
        if earlier is draft:
            continue
        if earlier.digest != draft.digest:
            raise IdempotencyConflict.of(draft)
        repeats[draft.index] = earlier.index
    return repeats


async def earlier_jobs(engine: AsyncEngine, client_id: str, drafts: Sequence[Draft]) -> dict[int, JobRow]:
    """The saved jobs these drafts' keys already name: index -> job; a key saved with another request raises."""
    by_key = {draft.key: draft for draft in drafts if draft.key is not None}
    if not by_key:
        return {}
    query = select(JOBS).where(JOBS.c.client_id == client_id, JOBS.c.idempotency_key.in_(list(by_key)))
    async with engine.connect() as conn:
        rows = [job_row(row._mapping) for row in await conn.execute(query)]
    found: dict[int, JobRow] = {}
    for row in sorted(rows, key=lambda r: by_key[r["idempotency_key"] or ""].index):
        draft = by_key[row["idempotency_key"] or ""]
        if row["request_hash"] != draft.digest:
            raise IdempotencyConflict.of(draft)
        found[draft.index] = row
    return found
