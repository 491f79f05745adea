"""Retry delays: the one backoff function both workers use, and the delay tiers it maps to."""

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

# How long a delivery whose endpoint has its fill of attempts in flight waits in a delay tier, as multiples of the
# shortest webhook retry delay (5 s, 15 s, then 60 s by default): longer each time it finds the endpoint busy again,
# so a slow endpoint's backlog comes back a few times a minute rather than every few seconds (each return costs a
# consume and a publish that other endpoints' deliveries wait behind). The webhook topology has a tier for each.
BUSY_STEPS = (1, 3, 12)


@dataclass(frozen=True)
class Tier:
    """One delay queue: messages wait between `delay` and `ceiling` seconds in it."""

    index: int
    delay: float

    @property
    def ceiling(self) -> float:
        return self.delay * 1.2

    @property
    def ttl_ms(self) -> int:
        """The queue-level TTL, which bounds any blocking inside the tier to 0.2 x delay."""
        return max(1, round(self.ceiling * 1000))


def job_tiers(base: float, maximum: float) -> list[Tier]:
    """Tier k waits min(maximum, base * 2^(k-1)); one tier per distinct wait."""
    tiers: list[Tier] = []
    k = 1
    while True:
        delay = min(maximum, base * 2 ** (k - 1))
        tiers.append(Tier(index=k, delay=delay))
        if delay >= maximum:
            return tiers
        k += 1


def schedule_tiers(delays: list[float]) -> list[Tier]:
    """Tiers for an explicit schedule (webhooks): one per distinct delay, in order."""
    distinct = sorted(set(delays))
    return [Tier(index=i + 1, delay=delay) for i, delay in enumerate(distinct)]


def busy_delays(schedule: list[float]) -> list[float]:
    """The waits of a delivery whose endpoint is busy, for a webhook retry schedule (see BUSY_STEPS)."""
    return [min(schedule) * step for step in BUSY_STEPS] if schedule else []


def busy_wait(tiers: list[Tier], times_busy: int) -> Tier:
    """The tier a delivery waits in after finding its endpoint busy for the `times_busy`-th time (1-based), among
    webhook tiers that include busy_delays' (the shortest tier is the shortest retry delay)."""
    step = BUSY_STEPS[min(max(times_busy, 1), len(BUSY_STEPS)) - 1]
    return tier_at_most(tiers, tiers[0].delay * step)


def tier_for_retry(tiers: list[Tier], retry: int) -> Tier:
    """The tier of the `retry`-th retry (1-based); past the last tier, the last."""
    return tiers[min(max(retry, 1), len(tiers)) - 1]


def tier_for_wait(tiers: list[Tier], seconds: float) -> Tier:
    """The shortest tier that waits at least `seconds` (the longest when none does)."""
    for tier in tiers:
        if tier.delay >= seconds:
            return tier
    return tiers[-1]


def jittered_ms(tier: Tier, rng: random.Random | None = None) -> int:
    """A per-message expiration in [delay, 1.2 x delay] milliseconds."""
    pick = (rng or random).uniform(tier.delay, tier.ceiling)
    return max(1, min(tier.ttl_ms, round(pick * 1000)))


def tier_at_most(tiers: list[Tier], seconds: float) -> Tier:
    """The longest tier that waits no more than `seconds` (the shortest when none does): come back in time."""
    fitting = [tier for tier in tiers if tier.delay <= seconds]
    return fitting[-1] if fitting else tiers[0]


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a sender's "-0000" reads as a naive time
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
