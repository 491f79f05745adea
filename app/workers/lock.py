"""The Redis half of a job's lease: SET NX PX with a random token, renewed and released by compare."""

import secrets
from dataclasses import dataclass
from enum import Enum

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError

# Renew or delete only while the key still holds our token: another worker may own it by now.
RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class Held(Enum):
    OURS = "ours"
    THEIRS = "theirs"
    NO_REDIS = "no_redis"  # Redis is down: the database lease alone guards the job (rule 3)


@dataclass
class JobLock:
    redis: Redis
    key: str
    ttl_ms: int
    token: str = ""

    async def acquire(self) -> tuple[Held, float]:
        """Try to take the lock; with THEIRS, also how many seconds it has left."""
        self.token = secrets.token_hex(16)
        try:
            if await self.redis.set(self.key, self.token, nx=True, px=self.ttl_ms):
                return Held.OURS, 0.0
            left = await self.redis.pttl(self.key)
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, carrying on with the database lease alone: {}", exc)
            return Held.NO_REDIS, 0.0
        return Held.THEIRS, max(left, 0) / 1000

    async def renew(self) -> None:
        await self._script(RENEW, self.token, self.ttl_ms)

    async def release(self) -> None:
        await self._script(RELEASE, self.token)

    async def _script(self, script: str, *args: str | int) -> None:
        try:
            await self.redis.eval(script, 1, self.key, *args)
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable for lock {}: {}", self.key, exc)
