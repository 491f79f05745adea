"""Circuit breakers in Redis, shared by every process: one state machine (closed → open → half-open with one
probe → closed or open again) for job types and for webhook endpoints, each with its own `Policy`, and beside it
the database rule that disables an endpoint for good. Breakers fail open when Redis is down."""

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from typing import Any

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import Select, Update, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.names import Names
from app.core.redis_batch import RedisBatch, Script, answer, evalsha, pipelined
from app.core.resources import Resources
from app.models.setwise import per_row
from app.models.tables import ENDPOINTS


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Policy:
    """When a circuit opens and how it closes again."""

    failure_rate: float  # open when failures / calls reach this…
    min_calls: int  # …over at least this many calls
    window_seconds: float | None  # the counts start afresh after this long; None: they never age
    cooldown_seconds: float  # open this long, then one probe decides
    probe_seconds: float  # the longest a probe (or an endpoint's in-flight slot) is held
    success_closes: bool = False  # any success clears the counts and closes the circuit

    def args(self, now: float) -> list[Any]:
        """ARGV[1..7] of the state machine's scripts."""
        window, probe_ms = self.window_seconds or 0, round(self.probe_seconds * 1000)
        flag = "1" if self.success_closes else "0"
        return [now, window, self.cooldown_seconds, probe_ms, self.min_calls, self.failure_rate, flag]


# ARGV[1..7] are the policy (Policy.args); each entry point's own arguments follow. The hash holds
# opened_at, window_start, calls, failures; the probe key holds whoever took the one half-open probe.
MACHINE = """
local now, window, cooldown = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local probe_ms, min_calls, rate = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local success_closes = ARGV[7] == '1'

local function look(breaker)
  local b = redis.call('hmget', breaker, 'opened_at', 'window_start', 'calls', 'failures')
  local opened = tonumber(b[1] or '0')
  local calls, failures = tonumber(b[3] or '0'), tonumber(b[4] or '0')
  if window > 0 and b[2] and now - tonumber(b[2]) > window then calls, failures = 0, 0 end
  if opened == 0 then return 'closed', 0, calls, failures end
  local left = opened + cooldown - now
  if left > 0 then return 'open', left, calls, failures end
  return 'half_open', 0, calls, failures
end

-- Only the probe moves an open circuit, unless the policy lets any success close it.
local function count(breaker, probe, holder, calls, failures)
  local is_probe = holder ~= '' and redis.call('get', probe) == holder
  if is_probe then redis.call('del', probe) end
  if success_closes and failures == 0 then redis.call('del', breaker, probe) return 'closed' end
  if tonumber(redis.call('hget', breaker, 'opened_at') or '0') > 0 then
    if not is_probe then return 'open' end
    if failures == 0 then redis.call('del', breaker) return 'closed' end
    redis.call('hset', breaker, 'opened_at', ARGV[1])
    return 'open'
  end
  if window > 0 and now - tonumber(redis.call('hget', breaker, 'window_start') or '0') > window then
    redis.call('hset', breaker, 'window_start', ARGV[1], 'calls', 0, 'failures', 0)
  end
  local c = redis.call('hincrby', breaker, 'calls', calls)
  local f = redis.call('hincrby', breaker, 'failures', failures)
  if window > 0 then redis.call('expire', breaker, math.ceil(window) * 10) end
  if c >= min_calls and f / c >= rate then
    redis.call('hset', breaker, 'opened_at', ARGV[1])
    return 'opened'
  end
  return 'closed'
end

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
# KEYS: (breaker, probe, in-flight set) per ask. ARGV[8]: cap; then (delivery id, operator 1/0) per ask.
ADMIT = (
    MACHINE
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
JOB_PROBE = "1"  # what a job type's probe key holds: the job-type API says "I am the probe", not who


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# ---------------------------------------------------------------- job types


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
        return Circuit(job_type, BreakerState(_text(state)), float(left), int(calls), int(failures), bool(probe))

    async def record(self, job_type: str, ok: bool, probe: bool) -> BreakerState | None:
        """Count a run's outcome (success, or a transient failure); returns the state after it."""
        return await self.record_counts(job_type, 1, 0 if ok else 1, probe)

    async def record_counts(self, job_type: str, calls: int, failures: int, probe: bool = False) -> BreakerState | None:
        """Count several outcomes at once; returns the state after them."""
        args = [*self.policy.args(self.clock()), JOB_PROBE if probe else "", calls, failures]
        try:
            state = _text(await self.redis.run_script(COUNT_SCRIPT, self._keys(job_type), args))
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


# ---------------------------------------------------------------- webhook endpoints (rule 11)


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


def endpoint_policy(failures: int, cooldown_seconds: float, lease_seconds: float) -> Policy:
    """Open after `failures` failures with no success between them, however far apart; any success closes."""
    return Policy(1.0, failures, None, cooldown_seconds, lease_seconds, success_closes=True)


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


ADMIT_SCRIPT, DONE_SCRIPT, RELEASE_SCRIPT = Script(ADMIT), Script(DONE), Script(RELEASE)


def _admissions(verdicts: Sequence[Any]) -> list[Admission]:
    return [Admission(Gate(_text(gate)), float(wait)) for gate, wait in verdicts]


def _opened(results: Sequence[Result], positions: Sequence[Any]) -> set[str]:
    """The keys whose circuit a batch of results opened (the script's 1-based positions), each logged."""
    opened = {results[int(i) - 1].key for i in positions}
    for key in sorted(opened):
        logger.warning("circuit opened for {}: deliveries wait in the delay tiers", key)
    return opened


LEASE_MARGIN_SECONDS = 5.0  # an attempt's lease: its timeout and this margin


def endpoint_breakers(resources: Resources) -> EndpointBreakers:
    """The endpoint breakers as the settings configure them; a slot or probe lasts one attempt's lease."""
    settings = resources.settings
    lease = settings.webhook_timeout_seconds + LEASE_MARGIN_SECONDS
    policy = endpoint_policy(settings.webhook_breaker_failures, settings.webhook_breaker_cooldown_seconds, lease)
    return EndpointBreakers(resources.redis, resources.names, policy, settings.webhook_max_in_flight_per_endpoint)


# ---------------------------------------------------------------- disabling an endpoint for good


@dataclass(frozen=True)
class EndpointResult:
    endpoint_id: str
    ok: bool
    gone: bool  # the endpoint answered 410 Gone


async def judge_endpoints(
    conn: AsyncConnection, results: Sequence[EndpointResult], now: datetime, disable_after_seconds: float
) -> list[tuple[str, str]]:
    """Track how long each endpoint has failed everything; disable those gone (410) or failing too long. A
    few statements per batch, whatever its size; returns (endpoint id, reason) for those disabled now."""
    last = {result.endpoint_id: result.ok for result in results}  # an endpoint's last result decides
    healthy = [endpoint for endpoint, ok in last.items() if ok]
    failing = [endpoint for endpoint, ok in last.items() if not ok]
    gone = list(dict.fromkeys(result.endpoint_id for result in results if result.gone))
    reasons = {endpoint: f"the endpoint answered 410 Gone at {_stamp(now)}" for endpoint in gone}
    cutoff = now - timedelta(seconds=disable_after_seconds)
    if healthy:
        await conn.execute(clear_failing(healthy))
    if failing:
        await conn.execute(mark_failing(failing, now))
        for endpoint, since in (await conn.execute(failing_too_long(failing, cutoff))).all():
            reasons.setdefault(endpoint, f"every attempt failed from {_stamp(since)} to {_stamp(now)}")
    if not reasons:
        return []
    disabled = set((await conn.execute(disable(reasons, gone, cutoff, now))).scalars())
    judged = [(endpoint, reasons[endpoint]) for endpoint in last if endpoint in disabled]
    for endpoint, reason in judged:
        logger.warning("webhook endpoint {} disabled: {}", endpoint, reason)
    return judged


def clear_failing(endpoint_ids: Sequence[str]) -> Update:
    """A success ends the failing period."""
    return (
        update(ENDPOINTS)
        .where(ENDPOINTS.c.id.in_(endpoint_ids), ENDPOINTS.c.failing_since.is_not(None))
        .values(failing_since=None)
    )


def mark_failing(endpoint_ids: Sequence[str], now: datetime) -> Update:
    """A failure starts the failing period, unless one is running."""
    return (
        update(ENDPOINTS)
        .where(ENDPOINTS.c.id.in_(endpoint_ids), ENDPOINTS.c.failing_since.is_(None))
        .values(failing_since=now)
    )


def failing_too_long(endpoint_ids: Sequence[str], cutoff: datetime) -> Select[str, datetime]:
    """The active endpoints among these that have failed everything since `cutoff` or before."""
    # The bare column, not `active IS true`: MSSQL would get `IS 1`, which it refuses.
    return select(ENDPOINTS.c.id, ENDPOINTS.c.failing_since).where(
        ENDPOINTS.c.id.in_(endpoint_ids), ENDPOINTS.c.active, ENDPOINTS.c.failing_since <= cutoff
    )


def disable(reasons: dict[str, str], gone: Sequence[str], cutoff: datetime, now: datetime) -> Update:
    """Disable each active endpoint with its reason, RETURNING the ids it disabled. One not gone must still be
    failing since `cutoff`: it may have been re-enabled since we looked."""
    still_failing = ENDPOINTS.c.failing_since <= cutoff
    return (
        update(ENDPOINTS)
        .where(ENDPOINTS.c.id.in_(list(reasons)), ENDPOINTS.c.active)
        .where(or_(ENDPOINTS.c.id.in_(gone), still_failing) if gone else still_failing)
        .values(active=False, disabled_reason=per_row(ENDPOINTS.c.id, ENDPOINTS.c.disabled_reason, reasons))
        .values(updated_at=now)
        .returning(ENDPOINTS.c.id)
    )


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")
