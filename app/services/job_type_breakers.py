"""A circuit breaker per job type, in Redis and shared by every process: the API refuses submits to an open one,
the job worker holds its jobs back in the delay tiers. It fails open when Redis is down."""

import time
from collections.abc import Callable
from dataclasses import dataclass

from loguru import logger
from redis.exceptions import RedisError

from app.core.breaker import MACHINE, BreakerState, Policy, reply_text
from app.core.names import Names
from app.core.redis_batch import RedisBatch, Script
from app.core.resources import Resources

# KEYS: breaker, probe. ARGV[8]: take the probe if half-open (1/0). Returns {state, left, calls, failures, probe}.
CHECK = (
    MACHINE
    + """
local state, left, calls, failures = look(KEYS[1])
local took = state == 'half_open' and ARGV[8] == '1' and redis.call('set', KEYS[2], '1', 'NX', 'PX', probe_ms)
return {state, tostring(left), calls, failures, took and 1 or 0}
"""
)
# KEYS: breaker, probe. ARGV[8..10]: probe holder ('' if none), calls, failures.
COUNT = MACHINE + "return count(KEYS[1], KEYS[2], ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10]))"
CHECK_SCRIPT, COUNT_SCRIPT = Script(CHECK), Script(COUNT)
JOB_PROBE = "1"  # what a job type's probe key holds: the job-type API says "I am the probe", not who


@dataclass(frozen=True)
class Circuit:
    job_type: str
    state: BreakerState
    retry_after: float
    calls: int
    failures: int
    probe: bool = False  # this caller holds the one half-open probe


@dataclass
class JobTypeBreakers:
    """Per job type. Only transient failures count: a client's bad input must not close a job type for everyone."""

    redis: RedisBatch  # each call shares a pipeline with the others made at the same time
    names: Names
    policy: Policy
    clock: Callable[[], float] = time.time

    @property
    def cooldown_seconds(self) -> float:
        return self.policy.cooldown_seconds

    def _keys(self, job_type: str) -> list[str]:
        return [self.names.job_breaker_key(job_type), self.names.job_probe_key(job_type)]

    async def check(self, job_type: str, take_probe: bool = False) -> Circuit:
        """The breaker's state; with `take_probe`, a half-open breaker lets exactly one caller through."""
        args = [*self.policy.args(self.clock()), "1" if take_probe else "0"]
        try:
            # A look without a probe changes nothing a caller sees: callers asking together share one answer.
            share = None if take_probe else ("job-breaker", job_type)
            answer = await self.redis.run_script(CHECK_SCRIPT, self._keys(job_type), args, share)
            state, left, calls, failures, probe = answer
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, job-type breakers are open to all: {}", exc)
            return Circuit(job_type, BreakerState.CLOSED, 0.0, 0, 0)
        return Circuit(job_type, BreakerState(reply_text(state)), float(left), int(calls), int(failures), bool(probe))

    async def record(self, job_type: str, ok: bool, probe: bool) -> BreakerState | None:
        """Count a run's outcome (success, or a transient failure); returns the state after it."""
        return await self.record_counts(job_type, 1, 0 if ok else 1, probe)

    async def record_counts(self, job_type: str, calls: int, failures: int, probe: bool = False) -> BreakerState | None:
        """Count several outcomes at once; returns the state after them."""
        args = [*self.policy.args(self.clock()), JOB_PROBE if probe else "", calls, failures]
        try:
            state = reply_text(await self.redis.run_script(COUNT_SCRIPT, self._keys(job_type), args))
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, job-type breaker not updated: {}", exc)
            return None
        if state == "opened":
            logger.warning("circuit for job type {} opened: its jobs wait in the delay tiers", job_type)
            return BreakerState.OPEN
        return BreakerState(state)

    async def release_probe(self, job_type: str) -> None:
        """Give the half-open probe back unused (the message was not one to run)."""
        try:
            await self.redis.call("DEL", self.names.job_probe_key(job_type))
        except (RedisError, OSError) as exc:
            logger.warning("Redis unavailable, breaker probe not released: {}", exc)


def job_type_breakers(resources: Resources) -> JobTypeBreakers:
    """The job-type breakers as the settings configure them."""
    settings = resources.settings
    policy = Policy(
        failure_rate=settings.breaker_failure_rate,
        min_calls=settings.breaker_min_calls,
        window_seconds=settings.breaker_window_seconds,
        cooldown_seconds=settings.breaker_cooldown_seconds,
        probe_seconds=settings.job_timeout_seconds + settings.lock_ttl_seconds,
    )
    return JobTypeBreakers(resources.redis_batch, resources.names, policy)
