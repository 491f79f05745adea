"""Per-client rate limit on job submissions: a sliding window in Redis, decided by one atomic script.
Every job counts, so a batch of 50 uses 50 of the minute's allowance (or, refused, none of it)."""

import time
import uuid
from dataclasses import dataclass

from loguru import logger
from redis.exceptions import RedisError

from app.core.names import Names
from app.core.redis_batch import RedisBatch, Script

WINDOW_SECONDS = 60.0

# KEYS: the client's window (a sorted set, one member per job). ARGV: now, window, limit, member prefix, jobs.
# All the jobs are counted or none. Returns {allowed (1/0), jobs in the window after this request, seconds until
# enough of them have left the window for a request of this size to fit (until the oldest leaves, once allowed)}.
SLIDE = """
local now, window, limit, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5])
redis.call('zremrangebyscore', KEYS[1], '-inf', now - window)
local count = redis.call('zcard', KEYS[1])
local allowed = 0
if count + n <= limit then
  for i = 1, n do redis.call('zadd', KEYS[1], now, ARGV[4] .. ':' .. i) end
  count = count + n
  allowed = 1
end
redis.call('expire', KEYS[1], math.ceil(window) + 1)
local leave = 1
if allowed == 0 then leave = count + n - limit end
local reset = window
local nth = redis.call('zrange', KEYS[1], leave - 1, leave - 1, 'WITHSCORES')
if nth[2] then reset = tonumber(nth[2]) + window - now end
return {allowed, count, tostring(reset)}
"""
SLIDE_SCRIPT = Script(SLIDE)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: float

    def headers(self) -> dict[str, str]:
        """X-RateLimit-* for every answer, and Retry-After when refused."""
        reset = str(max(1, round(self.reset_seconds)))
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": reset,
        }
        if not self.allowed:
            headers["Retry-After"] = reset
        return headers


@dataclass
class RateLimiter:
    redis: RedisBatch
    names: Names
    per_minute: int
    _warned_at: float = 0.0

    async def check(self, client_id: str, jobs: int = 1) -> Decision | None:
        """Count this request's jobs against the client's window, all or none; None when Redis is down (fail open)."""
        try:
            key = self.names.rate_limit_key(client_id)
            args = [time.time(), WINDOW_SECONDS, self.per_minute, uuid.uuid4().hex, jobs]
            allowed, count, reset = await self.redis.run_script(SLIDE_SCRIPT, [key], args)
        except (RedisError, OSError) as exc:
            if time.monotonic() - self._warned_at > 10:  # one warning per 10 s, not one per request
                self._warned_at = time.monotonic()
                logger.warning("Redis unavailable: rate limits are not enforced until it is back ({})", exc)
            return None
        return Decision(bool(int(allowed)), self.per_minute, max(0, self.per_minute - int(count)), float(reset))
