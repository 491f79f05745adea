"""Circuit breakers per job type, in Redis so every API and worker process shares them. Only transient
failures count: a client's bad input must not close a job type for everyone. Fails open when Redis is down."""

import asyncio
import time
from dataclasses import dataclass, field
from enum import StrEnum

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.core.names import Names
from app.core.resources import Resources


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


# KEYS: breaker hash, probe key. ARGV: now, window, cooldown, probe ttl ms, take_probe (1/0).
# Returns {state, seconds until it may half-open, calls, failures, probe taken (1/0)}.
ALLOW = """
local now, window, cooldown = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('hmget', KEYS[1], 'opened_at', 'window_start', 'calls', 'failures')
local opened = tonumber(b[1] or '0')
local calls, failures = tonumber(b[3] or '0'), tonumber(b[4] or '0')
if b[2] and now - tonumber(b[2]) > window then calls, failures = 0, 0 end
if opened == 0 then return {'closed', '0', calls, failures, 0} end
local left = opened + cooldown - now
if left > 0 then return {'open', tostring(left), calls, failures, 0} end
if ARGV[5] == '1' and redis.call('set', KEYS[2], '1', 'NX', 'PX', ARGV[4]) then
  return {'half_open', '0', calls, failures, 1}
end
return {'half_open', '0', calls, failures, 0}
"""

# KEYS: breaker hash, probe key. ARGV: now, window, calls, min calls, failure rate, probe (1/0), failures.
RECORD = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local calls_in, failures_in = tonumber(ARGV[3]), tonumber(ARGV[7])
local opened = tonumber(redis.call('hget', KEYS[1], 'opened_at') or '0')
if opened > 0 then
  if ARGV[6] ~= '1' then return 'open' end
  redis.call('del', KEYS[2])
  if failures_in == 0 then redis.call('del', KEYS[1]) return 'closed' end
  redis.call('hset', KEYS[1], 'opened_at', ARGV[1])
  return 'open'
end
local start = tonumber(redis.call('hget', KEYS[1], 'window_start') or '0')
if now - start > window then
  redis.call('hset', KEYS[1], 'window_start', ARGV[1], 'calls', 0, 'failures', 0)
end
local calls = redis.call('hincrby', KEYS[1], 'calls', calls_in)
local failures = redis.call('hincrby', KEYS[1], 'failures', failures_in)
redis.call('expire', KEYS[1], math.ceil(window) * 10)
if calls >= tonumber(ARGV[4]) and failures / calls >= tonumber(ARGV[5]) then
  redis.call('hset', KEYS[1], 'opened_at', ARGV[1])
  return 'opened'
end
return 'closed'
"""


@dataclass(frozen=True)
class Circuit:
    job_type: str
    state: BreakerState
    retry_after: float
    calls: int
    failures: int
    probe: bool = False  # this caller holds the one half-open probe


@dataclass(frozen=True)
class JobTypeBreakers:
    redis: Redis
    names: Names
    failure_rate: float
    min_calls: int
    window_seconds: float
    cooldown_seconds: float
    probe_seconds: float

    async def check(self, job_type: str, take_probe: bool = False) -> Circuit:
        """The breaker's state; with `take_probe`, a half-open breaker lets exactly one caller through."""
        try:
            state, left, calls, failures, probe = await self.redis.eval(
                ALLOW,
                2,
                self.names.job_breaker_key(job_type),
                self.names.job_probe_key(job_type),
                time.time(),
                self.window_seconds,
                self.cooldown_seconds,
                round(self.probe_seconds * 1000),
                "1" if take_probe else "0",
            )
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, job-type breakers are open to all: {}", exc)
            return Circuit(job_type, BreakerState.CLOSED, 0.0, 0, 0)
        name = state.decode() if isinstance(state, bytes) else str(state)
        return Circuit(job_type, BreakerState(name), float(left), int(calls), int(failures), bool(int(probe)))

    async def record(self, job_type: str, ok: bool, probe: bool) -> BreakerState | None:
        """Count a run's outcome (success, or a transient failure); returns the state after it."""
        return await self.record_counts(job_type, 1, 0 if ok else 1, probe)

    async def record_counts(self, job_type: str, calls: int, failures: int, probe: bool = False) -> BreakerState | None:
        """Count several outcomes at once; returns the state after them."""
        try:
            state = await self.redis.eval(
                RECORD,
                2,
                self.names.job_breaker_key(job_type),
                self.names.job_probe_key(job_type),
                time.time(),
                self.window_seconds,
                calls,
                self.min_calls,
                self.failure_rate,
                "1" if probe else "0",
                failures,
            )
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, job-type breaker not updated: {}", exc)
            return None
        name = state.decode() if isinstance(state, bytes) else str(state)
        if name == "opened":
            logger.warning("circuit for job type {} opened: its jobs wait in the delay tiers", job_type)
            return BreakerState.OPEN
        return BreakerState(name)

    async def release_probe(self, job_type: str) -> None:
        """Give the half-open probe back unused (the message was not one to run)."""
        try:
            await self.redis.delete(self.names.job_probe_key(job_type))
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, breaker probe not released: {}", exc)


def job_type_breakers(resources: Resources) -> JobTypeBreakers:
    """The breakers as the settings configure them."""
    settings = resources.settings
    return JobTypeBreakers(
        resources.redis,
        resources.names,
        settings.breaker_failure_rate,
        settings.breaker_min_calls,
        settings.breaker_window_seconds,
        settings.breaker_cooldown_seconds,
        probe_seconds=settings.job_timeout_seconds + settings.lock_ttl_seconds,
    )


TRUST_CLOSED_SECONDS = 0.25  # a worker acts on a closed breaker this long before asking again
FLUSH_SECONDS = 0.25


@dataclass
class BatchedBreakers:
    """The job worker's view of the breakers: it trusts a closed state briefly and sends its successes in sums,
    so a run costs no Redis round trip while all is well. Failures and probes still go at once."""

    breakers: JobTypeBreakers
    _closed_at: dict[str, float] = field(default_factory=dict)
    _tally: dict[str, list[int]] = field(default_factory=dict)
    _flusher: "asyncio.Task[None] | None" = None

    @property
    def cooldown_seconds(self) -> float:
        return self.breakers.cooldown_seconds

    async def check(self, job_type: str) -> Circuit:
        seen = self._closed_at.get(job_type)
        if seen is not None and time.monotonic() - seen < TRUST_CLOSED_SECONDS:
            return Circuit(job_type, BreakerState.CLOSED, 0.0, 0, 0)
        circuit = await self.breakers.check(job_type, take_probe=True)
        if circuit.state is BreakerState.CLOSED:
            self._closed_at[job_type] = time.monotonic()
        return circuit

    async def record(self, job_type: str, ok: bool, probe: bool) -> None:
        if probe:
            await self.breakers.record(job_type, ok, probe=True)
            return
        tally = self._tally.setdefault(job_type, [0, 0])
        tally[0] += 1
        tally[1] += 0 if ok else 1
        if not ok:
            await self.flush()  # a failure may open the circuit: say it now, with the successes before it
        elif self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_later(), name="breaker-tally")

    async def release_probe(self, job_type: str) -> None:
        await self.breakers.release_probe(job_type)

    async def _flush_later(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)
        await self.flush()

    async def flush(self) -> None:
        tallies, self._tally = self._tally, {}
        for job_type, (calls, failures) in tallies.items():
            if await self.breakers.record_counts(job_type, calls, failures) is BreakerState.OPEN:
                self._closed_at.pop(job_type, None)  # stop trusting it: the next run asks
