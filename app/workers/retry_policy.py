"""What a failed attempt means: retry after a backoff tier, or dead-letter. The one place that decides."""

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.core.backoff import Tier, jittered_ms, tier_at_most, tier_for_retry
from app.core.statuses import DeadReason
from app.handlers.errors import JobTimeout, PermanentError, TransientError


@dataclass(frozen=True)
class Retry:
    tier: Tier
    expiration_ms: int
    next_attempt_at: datetime


@dataclass(frozen=True)
class DeadLetter:
    reason: DeadReason


def error_of(exc: BaseException) -> dict[str, Any]:
    """How an error is stored and shown: its type and message."""
    return {"type": type(exc).__name__, "message": str(exc) or type(exc).__name__}


def budget(max_retries: int) -> int:
    """Attempts a job may make in one retry budget."""
    return max_retries + 1


def decide(
    exc: BaseException,
    attempts: int,
    max_retries: int,
    tiers: list[Tier],
    now: datetime,
    rng: random.Random | None = None,
) -> Retry | DeadLetter:
    """Permanent errors die at once; anything else retries while the budget lasts (unexpected = transient)."""
    if isinstance(exc, PermanentError):
        return DeadLetter(DeadReason.PERMANENT_ERROR)
    if attempts >= budget(max_retries):
        return DeadLetter(DeadReason.TIMEOUT if isinstance(exc, JobTimeout) else DeadReason.RETRIES_EXHAUSTED)
    if isinstance(exc, TransientError) and exc.retry_after is not None:
        return asked_wait(exc.retry_after, tiers, now)
    tier = tier_for_retry(tiers, attempts)
    # Due at the tier's lower bound; the message's own expiration falls in [delay, 1.2 x delay].
    return Retry(tier, jittered_ms(tier, rng), now + timedelta(seconds=tier.delay))


def asked_wait(retry_after: float, tiers: list[Tier], now: datetime) -> Retry:
    """The retry a failing service asked for (its Retry-After), within RETRY_BASE_DELAY and RETRY_MAX_DELAY (the
    shortest and the longest tier): never sooner than any retry, never later than the longest backoff."""
    wait = min(max(retry_after, tiers[0].delay), tiers[-1].delay)
    tier = tier_at_most(tiers, wait)
    # Past the tier's ceiling the message comes back early and is deferred until next_attempt_at.
    return Retry(tier, min(round(wait * 1000), tier.ttl_ms), now + timedelta(seconds=wait))


def delivery_plan(
    budget_used: int, schedule: list[float], tiers: list[Tier], now: datetime, retry_after: float | None = None
) -> Retry | DeadLetter:
    """After a failed delivery attempt (the `budget_used`-th): wait the schedule's next step, or give up.

    A receiver's Retry-After is honoured within bounds: never sooner than the step, never later than twice it.
    """
    if budget_used > len(schedule):
        return DeadLetter(DeadReason.RETRIES_EXHAUSTED)
    delay = schedule[budget_used - 1]
    tier = next(t for t in tiers if t.delay == delay)
    if retry_after is None:
        return Retry(tier, jittered_ms(tier), now + timedelta(seconds=delay))
    wait = min(max(retry_after, delay), 2 * delay)
    # Past the tier's ceiling the message comes back early and is deferred until next_attempt_at.
    return Retry(tier, min(round(wait * 1000), tier.ttl_ms), now + timedelta(seconds=wait))
