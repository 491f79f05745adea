"""A webhook endpoint's circuit as the console reads it: the breaker's own state machine (core/breaker.py) asked
to look, never to count, so reading it changes nothing the webhook workers see."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from loguru import logger
from redis.exceptions import RedisError

from app.core.breaker import LEASE_MARGIN_SECONDS, MACHINE, BreakerState, Policy, endpoint_policy, reply_text
from app.core.names import Names
from app.core.redis_batch import RedisBatch, Script
from app.core.resources import Resources

# KEYS: breaker. Returns {state, seconds left open}.
LOOK = MACHINE + "local state, left = look(KEYS[1])\nreturn {state, tostring(left)}"
LOOK_SCRIPT = Script(LOOK)


@dataclass(frozen=True)
class EndpointCircuits:
    """Reads each endpoint's breaker, one round trip a call (shared with the calls made at the same time)."""

    redis: RedisBatch
    names: Names
    policy: Policy
    clock: Callable[[], float] = time.time

    async def state(self, endpoint_id: str) -> BreakerState:
        """`closed`, `open` (deliveries wait in the delay tiers) or `half_open` (the next attempt decides);
        `closed` when Redis cannot say, as the workers then send regardless."""
        key = self.names.endpoint_breaker_key(endpoint_id)
        try:
            answer = await self.redis.run_script(LOOK_SCRIPT, [key], self.policy.args(self.clock()), ("look", key))
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, an endpoint's circuit reads as closed: {}", exc)
            return BreakerState.CLOSED
        return BreakerState(reply_text(answer[0]))


def endpoint_circuits(resources: Resources) -> EndpointCircuits:
    """The endpoints' circuits under the policy the webhook workers run them by."""
    settings = resources.settings
    lease = settings.webhook_timeout_seconds + LEASE_MARGIN_SECONDS
    policy = endpoint_policy(settings.webhook_breaker_failures, settings.webhook_breaker_cooldown_seconds, lease)
    return EndpointCircuits(resources.redis_batch, resources.names, policy)
