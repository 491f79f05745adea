"""The fast path of idempotent submits: Redis SET NX remembers (client, key) -> request and job.
The database's filtered unique index stays the safety net, so Redis being down changes nothing but speed."""

from dataclasses import dataclass

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.core.names import Names

PENDING = "-"  # the job is being created by whoever set the key
# A claim that never becomes a job (its process died) must not hold the key for a whole day.
PENDING_TTL_SECONDS = 60


@dataclass(frozen=True)
class Seen:
    """What Redis knows of an earlier request with this key."""

    digest: str
    job_id: str | None


@dataclass(frozen=True)
class IdempotencyCache:
    redis: Redis
    names: Names
    ttl_seconds: int

    async def claim(self, client_id: str, key: str, digest: str) -> Seen | None:
        """Take the key for this request; None when it is ours (or Redis cannot say), else what holds it."""
        name = self.names.idempotency_key(client_id, key)
        try:
            if await self.redis.set(name, f"{digest}|{PENDING}", nx=True, ex=PENDING_TTL_SECONDS):
                return None
            value = await self.redis.get(name)
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable for idempotency; the database alone decides: {}", exc)
            return None
        if value is None:
            return None
        text = value.decode() if isinstance(value, bytes) else str(value)
        held_digest, _, job_id = text.partition("|")
        return Seen(held_digest, None if job_id == PENDING else job_id)

    async def remember(self, client_id: str, key: str, digest: str, job_id: str) -> None:
        try:
            await self.redis.set(self.names.idempotency_key(client_id, key), f"{digest}|{job_id}", ex=self.ttl_seconds)
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable for idempotency: {}", exc)
