"""Per-client rate limit on job submissions: a sliding window in Redis, decided by one atomic script.
Every job counts, so a batch of 50 uses 50 of the minute's allowance (or, refused, none of it)."""

import time
import uuid
from dataclasses import dataclass

from loguru import logger
from redis.exceptions import RedisError

from app.core.names import Names
from app.core.redis_batch import Merged, RedisBatch, Script

WINDOW_SECONDS = 60.0

# One call per request: KEYS[i] the client's window (a sorted set, one member per job); ARGV, five per call: now,
# window, limit, member prefix, jobs. Calls are judged in order, and each counts all its jobs or none. Returns,
# three per call: allowed (1/0), jobs in the window after it, seconds until enough of them have left the window
# for a request of this size to fit (until the oldest leaves, once allowed). The requests arriving together share
# one script run (a `Merged` script of the Redis pipeline), whoever their clients are.
SLIDE = """
local out = {}
for i, key in ipairs(KEYS) do
  local at = (i - 1) * 5
  local now, window, limit = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local prefix, n = ARGV[at + 4], tonumber(ARGV[at + 5])
  redis.call('zremrangebyscore', key, '-inf', now - window)
  local count = redis.call('zcard', key)
  local allowed = 0
  if count + n <= limit then
    for j = 1, n do redis.call('zadd', key, now, prefix .. ':' .. j) end
    count = count + n
    allowed = 1
  end
  redis.call('expire', key, math.ceil(window) + 1)
  local leave = 1
  if allowed == 0 then leave = count + n - limit end
  local reset = window
  local nth = redis.call('zrange', key, leave - 1, leave - 1, 'WITHSCORES')
  if nth[2] then reset = tonumber(nth[2]) + window - now end
  out[#out + 1] = allowed
  out[#out + 1] = count
  out[#out + 1] = tostring(reset)
end
return out
"""
SLIDE_SCRIPT = Merged(Script(SLIDE), arity=5, answers=3)


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
            allowed, count, reset = await self.redis.run_merged(SLIDE_SCRIPT, key, args)
        except (RedisError, OSError) as exc:
            if time.monotonic() - self._warned_at > 10:  # one warning per 10 s, not one per request
                self._warned_at = time.monotonic()
                logger.warning("Redis unavailable: rate limits are not enforced until it is back ({})", exc)
            return None
        return Decision(bool(int(allowed)), self.per_minute, max(0, self.per_minute - int(count)), float(reset))
