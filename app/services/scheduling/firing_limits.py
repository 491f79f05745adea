"""Schedules under the rate limit: each firing that makes a job counts against its client's window like a submit.
A firing over the limit is not made: its schedule stays due in the database (rule 18) and fires, once, when the
window has room; meanwhile the scheduler passes over that client's schedules, so they do not crowd out others."""

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.core import metrics
from app.services.rate_limit import RateLimiter
from app.services.submit import Draft

# The longest a client's firings are passed over before its window is asked again: room may come sooner than the
# window said (a client's key was reset), and one claim a few seconds is cheap.
MAX_HOLD_SECONDS = 2.0


@dataclass
class FiringLimits:
    """The rate limiter, and until when (monotonic) each held client's schedules are passed over."""

    limiter: RateLimiter
    _held: dict[str, float] = field(default_factory=dict)

    def held_clients(self) -> frozenset[str]:
        """The clients whose firings are waiting for room in their window now."""
        now = time.monotonic()
        for client, until in list(self._held.items()):
            if until <= now:
                del self._held[client]
        return frozenset(self._held)

    async def allowed(self, drafts: Iterable[Draft]) -> set[str]:
        """The idempotency keys of the drafts their clients' windows take (each counted there); Redis down: all
        (fail open, as for submits)."""
        drafts = list(drafts)
        decisions = await asyncio.gather(*(self.limiter.check(d.job["client_id"]) for d in drafts))
        keys: set[str] = set()
        for draft, decision in zip(drafts, decisions, strict=True):
            if decision is None or decision.allowed:
                keys.add(draft.key or "")
                continue
            client = draft.job["client_id"]
            metrics.rate_limited(client).inc()
            self._held[client] = time.monotonic() + min(MAX_HOLD_SECONDS, max(0.1, decision.reset_seconds))
        return keys
