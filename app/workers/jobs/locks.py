"""The Redis half of job leases: SET NX PX with a random token, renewed and released by compare, for a whole
batch of jobs in one round trip each (rule 3, rule 17)."""

import secrets
from dataclasses import dataclass
from enum import Enum

from loguru import logger
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

# Take each free key with our token; for each key another worker holds, how many ms it has left (-1: ours now).
ACQUIRE = """
local left = {}
for i, key in ipairs(KEYS) do
  if redis.call('set', key, ARGV[i + 1], 'NX', 'PX', ARGV[1]) then left[i] = -1
  else left[i] = math.max(redis.call('pttl', key), 0) end
end
return left
"""
# Renew or delete only the keys that still hold our token: another worker may own some of them by now.
RENEW = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[i + 1] then n = n + redis.call('pexpire', key, ARGV[1]) end
end
return n
"""
RELEASE = """
local n = 0
for i, key in ipairs(KEYS) do
  if redis.call('get', key) == ARGV[i] then n = n + redis.call('del', key) end
end
return n
"""


class Held(Enum):
    OURS = "ours"
    THEIRS = "theirs"
    NO_REDIS = "no_redis"  # Redis is down: the database lease alone guards the job (rule 3)


@dataclass(frozen=True)
class Lock:
    """One job's lock as taken: whose it is, our token, and (when theirs) the seconds it has left."""

    key: str
    held: Held
    token: str = ""
    seconds_left: float = 0.0


@dataclass
class JobLocks:
    redis: Redis
    ttl_ms: int

    def __post_init__(self) -> None:
        # Registered once: each call then sends the script's hash (EVALSHA), not its text.
        self._acquire = self.redis.register_script(ACQUIRE)
        self._renew = self.redis.register_script(RENEW)
        self._release = self.redis.register_script(RELEASE)

    async def acquire(self, keys: list[str]) -> list[Lock]:
        """Try to take every key in one round trip; Redis down means NO_REDIS for all: carry on with the
        database lease alone."""
        tokens = [secrets.token_hex(16) for _ in keys]
        try:
            left = await self._acquire(keys, [self.ttl_ms, *tokens])
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, carrying on with the database lease alone: {}", exc)
            return [Lock(key, Held.NO_REDIS) for key in keys]
        return [
            Lock(key, Held.OURS, token) if ms < 0 else Lock(key, Held.THEIRS, seconds_left=ms / 1000)
            for key, token, ms in zip(keys, tokens, left, strict=True)
        ]

    async def renew(self, locks: list[Lock]) -> None:
        ours = [lock for lock in locks if lock.held is Held.OURS]
        if ours:
            await self._run(self._renew, [lock.key for lock in ours], self.ttl_ms, *[lock.token for lock in ours])

    async def release(self, locks: list[Lock]) -> None:
        ours = [lock for lock in locks if lock.held is Held.OURS]
        if ours:
            await self._run(self._release, [lock.key for lock in ours], *[lock.token for lock in ours])

    async def _run(self, script: AsyncScript, keys: list[str], *args: str | int) -> None:
        try:
            await script(keys, list(args))
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable for {} job lock(s): {}", len(keys), exc)
