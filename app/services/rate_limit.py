"""Per-client rate limit on job submissions: a sliding window in Redis, decided by one atomic script."""

import time
import uuid
from dataclasses import dataclass

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.core.names import Names

WINDOW_SECONDS = 60.0

# KEYS: the client's window (a sorted set of request times). ARGV: now, window, limit, member.
# Returns {allowed (1/0), requests in the window after this one, seconds until the oldest leaves the window}.
SLIDE = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('zremrangebyscore', KEYS[1], '-inf', now - window)
local count = redis.call('zcard', KEYS[1])
local allowed = 0
if count < limit then
  redis.call('zadd', KEYS[1], now, ARGV[4])
  count = count + 1
  allowed = 1
end
redis.call('expire', KEYS[1], math.ceil(window) + 1)
local oldest = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
local reset = window
if oldest[2] then reset = tonumber(oldest[2]) + window - now end
return {allowed, count, tostring(reset)}
"""


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
    redis: Redis
    names: Names
    per_minute: int
    _warned_at: float = 0.0

    async def check(self, client_id: str) -> Decision | None:
        """Count this request against the client's window; None when Redis is down (fail open)."""
        try:
            allowed, count, reset = await self.redis.eval(
                SLIDE,
                1,
                self.names.rate_limit_key(client_id),
                time.time(),
                WINDOW_SECONDS,
                self.per_minute,
                uuid.uuid4().hex,
            )
        except (RedisError, OSError) as exc:
            if time.monotonic() - self._warned_at > 10:  # one warning per 10 s, not one per request
                self._warned_at = time.monotonic()
                logger.warning("Redis unavailable: rate limits are not enforced until it is back ({})", exc)
            return None
        return Decision(bool(int(allowed)), self.per_minute, max(0, self.per_minute - int(count)), float(reset))
