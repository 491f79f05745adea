"""The circuit breaker's state machine in Redis, shared by every process: closed → open → half-open with one
probe → closed or open again. Job types and webhook endpoints each run it under their own `Policy`, through Lua
entry points of their own appended to `MACHINE`."""

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


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


LEASE_MARGIN_SECONDS = 5.0  # an endpoint attempt's lease: its timeout and this margin


def endpoint_policy(failures: int, cooldown_seconds: float, lease_seconds: float) -> Policy:
    """A webhook endpoint's: open after `failures` failures with no success between them, however far apart; any
    success closes."""
    return Policy(1.0, failures, None, cooldown_seconds, lease_seconds, success_closes=True)


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
"""


def reply_text(value: Any) -> str:
    """A script's reply (bytes, or text with a decoding client) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)
