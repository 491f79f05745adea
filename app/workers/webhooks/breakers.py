"""A circuit breaker and an in-flight cap per webhook endpoint (rule 11), in Redis and shared by every process:
the breaker's state machine (core/breaker.py) under the endpoint policy, with a slot per attempt in flight. They
fail open when Redis is down."""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.core.breaker import LEASE_MARGIN_SECONDS as LEASE_MARGIN_SECONDS
from app.core.breaker import MACHINE, Policy, reply_text
from app.core.breaker import endpoint_policy as endpoint_policy
from app.core.names import Names
from app.core.redis_batch import Script, answer, evalsha, pipelined
from app.core.resources import Resources

# The endpoints' part of the machine: an attempt's slot in the in-flight set, and the admission of one attempt.
SLOTS = """
local function take_slot(inflight, member, cap)
  redis.call('zremrangebyscore', inflight, '-inf', now - probe_ms / 1000)
  if redis.call('zscore', inflight, member) then return true end
  if redis.call('zcard', inflight) >= cap then return false end
  redis.call('zadd', inflight, ARGV[1], member)
  redis.call('expire', inflight, math.ceil(probe_ms / 1000) + 1)
  return true
end

-- An operator's attempt always goes, takes no shared slot (only its worker's own), and is the probe of a circuit
-- that is not closed.
local function admit(breaker, probe, inflight, member, operator, cap)
  local state, left = look(breaker)
  if operator == '1' then
    if state ~= 'closed' then redis.call('set', probe, member, 'PX', probe_ms) end
    return {'send', '0'}
  end
  if state == 'open' then return {'open', tostring(left)} end
  if state == 'half_open' and redis.call('exists', probe) == 1 then return {'open', tostring(cooldown / 10)} end
  if not take_slot(inflight, member, cap) then return {'busy', '0'} end
  if state == 'closed' then return {'send', '0'} end
  redis.call('set', probe, member, 'PX', probe_ms)
  return {'probe', '0'}
end
"""
# KEYS: (breaker, probe, in-flight set) per ask. ARGV[8]: cap; then (delivery id, operator 1/0) per ask.
ADMIT = (
    MACHINE
    + SLOTS
    + """
local out = {}
for i = 1, #KEYS / 3 do
  local k, a = 3 * i - 2, 7 + 2 * i
  out[i] = admit(KEYS[k], KEYS[k + 1], KEYS[k + 2], ARGV[a], ARGV[a + 1], tonumber(ARGV[8]))
end
return out
"""
)
# KEYS: (breaker, probe, in-flight set) per result. ARGV[8..]: (delivery id, failed 1/0, heir or '') per result.
# A success's heir takes over its slot (the success closed the circuit, so the heir was sent without asking).
# Returns the positions (1-based) of the results that opened their circuit.
DONE = (
    MACHINE
    + """
local opened = {}
for i = 1, #KEYS / 3 do
  local k, a = 3 * i - 2, 5 + 3 * i
  redis.call('zrem', KEYS[k + 2], ARGV[a])
  if count(KEYS[k], KEYS[k + 1], ARGV[a], 1, tonumber(ARGV[a + 1])) == 'opened' then opened[#opened + 1] = i end
  if ARGV[a + 2] ~= '' then
    redis.call('zadd', KEYS[k + 2], ARGV[1], ARGV[a + 2])
    redis.call('expire', KEYS[k + 2], math.ceil(probe_ms / 1000) + 1)
  end
end
return opened
"""
)
# KEYS: (probe, in-flight set) per ask. ARGV: delivery id per ask. Frees the slot, and the probe if it held it.
RELEASE = """
for i = 1, #KEYS / 2 do
  redis.call('zrem', KEYS[2 * i], ARGV[i])
  if redis.call('get', KEYS[2 * i - 1]) == ARGV[i] then redis.call('del', KEYS[2 * i - 1]) end
end
"""
ADMIT_SCRIPT, DONE_SCRIPT, RELEASE_SCRIPT = Script(ADMIT), Script(DONE), Script(RELEASE)


class Gate(Enum):
    SEND = "send"
    PROBE = "probe"  # half-open: this one attempt decides
    OPEN = "open"  # skip the attempt; wait `wait` seconds
    BUSY = "busy"  # the endpoint has its fill of in-flight deliveries


@dataclass(frozen=True)
class Ask:
    key: str  # the endpoint's id, or "callback:<host>" for a job's callback URL
    delivery_id: str
    operator: bool = False  # an operator's redeliver, recover or re-enable: it goes now, as the probe


@dataclass(frozen=True)
class Admission:
    gate: Gate
    wait: float = 0.0


@dataclass(frozen=True)
class Result:
    key: str
    delivery_id: str
    ok: bool
    heir: str = ""  # after a success: the delivery this process handed its slot to, already sending


@dataclass
class EndpointBreakers:
    """A breaker and an in-flight cap per endpoint, so one dead endpoint never holds the consumers the others
    need. Every method takes a batch and costs one round trip."""

    redis: Redis
    names: Names
    policy: Policy
    max_in_flight: int
    clock: Callable[[], float] = time.time

    def _keys(self, key: str) -> list[str]:
        names = self.names
        return [names.endpoint_breaker_key(key), names.endpoint_probe_key(key), names.endpoint_inflight_key(key)]

    async def admit_many(self, asks: Sequence[Ask]) -> list[Admission]:
        """May each attempt go now? Judged in order, so earlier asks count against the cap and take the probe."""
        return (await self.done_then_admit((), asks))[1]

    async def done_many(self, results: Sequence[Result]) -> set[str]:
        """Free the slots (a success's goes to its heir, if it has one) and feed the breakers in order; returns the
        keys whose circuit this batch opened."""
        return (await self.done_then_admit(results, ()))[0]

    async def done_then_admit(
        self, results: Sequence[Result], asks: Sequence[Ask], freed: Sequence[Ask] = ()
    ) -> tuple[set[str], list[Admission]]:
        """`done_many`, `release_many` of `freed`, then `admit_many`, in one round trip and in that order: the asks
        see the slots the results and the releases freed and the circuits the results opened, and a slot a result
        handed over is given back after it was handed. Without Redis every ask may send."""
        calls = [
            *([evalsha(DONE_SCRIPT, *self._done_args(results))] if results else []),
            *([evalsha(RELEASE_SCRIPT, *self._release_args(freed))] if freed else []),
            *([evalsha(ADMIT_SCRIPT, *self._admit_args(asks))] if asks else []),
        ]
        if not calls:
            return set(), []
        try:
            replies = [answer(reply) for reply in await pipelined(self.redis, calls)]
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, endpoint breakers and caps skipped: {}", exc)
            return set(), [Admission(Gate.SEND) for _ in asks]
        opened = _opened(results, replies[0]) if results else set()
        return opened, _admissions(replies[-1]) if asks else []

    def _admit_args(self, asks: Sequence[Ask]) -> tuple[list[str], list[Any]]:
        keys = [k for ask in asks for k in self._keys(ask.key)]
        per_ask = [v for ask in asks for v in (ask.delivery_id, "1" if ask.operator else "0")]
        return keys, [*self.policy.args(self.clock()), self.max_in_flight, *per_ask]

    def _done_args(self, results: Sequence[Result]) -> tuple[list[str], list[Any]]:
        keys = [k for result in results for k in self._keys(result.key)]
        # Only a success hands its slot on: it closed the circuit its heir was sent through.
        per_result = [v for r in results for v in (r.delivery_id, 0 if r.ok else 1, r.heir if r.ok else "")]
        return keys, [*self.policy.args(self.clock()), *per_result]

    async def release_many(self, asks: Sequence[Ask]) -> None:
        """Free the slots (and a probe) without judging the endpoints: nothing was sent."""
        await self.done_then_admit((), (), asks)

    def _release_args(self, asks: Sequence[Ask]) -> tuple[list[str], list[Any]]:
        return [k for ask in asks for k in self._keys(ask.key)[1:]], [ask.delivery_id for ask in asks]


def _admissions(verdicts: Sequence[Any]) -> list[Admission]:
    return [Admission(Gate(reply_text(gate)), float(wait)) for gate, wait in verdicts]


def _opened(results: Sequence[Result], positions: Sequence[Any]) -> set[str]:
    """The keys whose circuit a batch of results opened (the script's 1-based positions), each logged."""
    opened = {results[int(i) - 1].key for i in positions}
    for key in sorted(opened):
        logger.warning("circuit opened for {}: deliveries wait in the delay tiers", key)
    return opened


def endpoint_breakers(resources: Resources) -> EndpointBreakers:
    """The endpoint breakers as the settings configure them; a slot or probe lasts one attempt's lease."""
    settings = resources.settings
    lease = settings.webhook_timeout_seconds + LEASE_MARGIN_SECONDS
    policy = endpoint_policy(settings.webhook_breaker_failures, settings.webhook_breaker_cooldown_seconds, lease)
    return EndpointBreakers(resources.redis, resources.names, policy, settings.webhook_max_in_flight_per_endpoint)
