"""Retry delays: the one backoff function both workers use, and the delay tiers it maps to."""

import random
from dataclasses import dataclass


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
