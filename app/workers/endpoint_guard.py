"""Per-endpoint protection shared by every webhook worker through Redis (rule 11): a circuit breaker and an
in-flight cap, so one dead endpoint never holds the consumers the others need. Fails open when Redis is down."""

import time
from dataclasses import dataclass
from enum import Enum

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.core.names import Names

# KEYS: breaker hash, probe key. ARGV: now, cooldown, probe ttl ms.
# Returns {verdict, seconds left}: 0 send, 1 open (skip), 2 half-open probe (this caller is the one probe).
ALLOW = """
local opened = tonumber(redis.call('hget', KEYS[1], 'opened_at') or '0')
if opened == 0 then return {0, '0'} end
local left = opened + tonumber(ARGV[2]) - tonumber(ARGV[1])
if left > 0 then return {1, tostring(left)} end
if redis.call('set', KEYS[2], '1', 'NX', 'PX', ARGV[3]) then return {2, '0'} end
return {1, tostring(tonumber(ARGV[2]) / 10)}
"""

# KEYS: breaker hash, probe key. ARGV: ok (1/0), now, threshold. Returns 1 when this failure opened it.
RECORD = """
redis.call('del', KEYS[2])
if ARGV[1] == '1' then redis.call('del', KEYS[1]) return 0 end
local failures = redis.call('hincrby', KEYS[1], 'failures', 1)
local opened = tonumber(redis.call('hget', KEYS[1], 'opened_at') or '0')
if opened > 0 or failures >= tonumber(ARGV[3]) then
  redis.call('hset', KEYS[1], 'opened_at', ARGV[2])
  return opened == 0 and 1 or 0
end
return 0
"""

# KEYS: in-flight set. ARGV: member, now, lease seconds, cap. Returns 1 when the slot is taken.
TAKE_SLOT = """
redis.call('zremrangebyscore', KEYS[1], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[3]))
if redis.call('zscore', KEYS[1], ARGV[1]) then return 1 end
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('zadd', KEYS[1], ARGV[2], ARGV[1])
redis.call('expire', KEYS[1], math.ceil(tonumber(ARGV[3])) + 1)
return 1
"""


class Gate(Enum):
    SEND = "send"
    PROBE = "probe"  # half-open: this one attempt decides
    OPEN = "open"  # skip the attempt; wait `seconds`
    BUSY = "busy"  # the endpoint has its fill of in-flight deliveries


@dataclass(frozen=True)
class EndpointGuard:
    redis: Redis
    names: Names
    failures_to_open: int
    cooldown_seconds: float
    max_in_flight: int
    lease_seconds: float

    async def admit(self, endpoint_id: str, delivery_id: str) -> tuple[Gate, float]:
        """May this delivery be attempted now? With OPEN or BUSY, also how long to wait."""
        try:
            verdict, left = await self.redis.eval(
                ALLOW,
                2,
                self.names.endpoint_breaker_key(endpoint_id),
                self.names.endpoint_probe_key(endpoint_id),
                time.time(),
                self.cooldown_seconds,
                round(self.lease_seconds * 1000),
            )
            if int(verdict) == 1:
                return Gate.OPEN, float(left)
            slot = await self.redis.eval(
                TAKE_SLOT,
                1,
                self.names.endpoint_inflight_key(endpoint_id),
                delivery_id,
                time.time(),
                self.lease_seconds,
                self.max_in_flight,
            )
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, endpoint breaker and cap skipped: {}", exc)
            return Gate.SEND, 0.0
        if not int(slot):
            return Gate.BUSY, 0.0
        return (Gate.PROBE if int(verdict) == 2 else Gate.SEND), 0.0

    async def done(self, endpoint_id: str, delivery_id: str, ok: bool) -> bool:
        """Free the slot and feed the breaker; True when this failure opened it."""
        try:
            await self.redis.zrem(self.names.endpoint_inflight_key(endpoint_id), delivery_id)
            opened = await self.redis.eval(
                RECORD,
                2,
                self.names.endpoint_breaker_key(endpoint_id),
                self.names.endpoint_probe_key(endpoint_id),
                "1" if ok else "0",
                time.time(),
                self.failures_to_open,
            )
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, endpoint breaker not updated: {}", exc)
            return False
        return bool(int(opened))

    async def release(self, endpoint_id: str, delivery_id: str) -> None:
        """Free the slot without judging the endpoint (nothing was sent)."""
        try:
            await self.redis.zrem(self.names.endpoint_inflight_key(endpoint_id), delivery_id)
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable for endpoint slot: {}", exc)
