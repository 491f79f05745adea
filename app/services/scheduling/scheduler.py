"""The scheduler's cycle (a background worker of every process that runs it): queue the scheduled jobs that are
due, then fire the recurring schedules that are due. Any number of processes may run it at once."""

from dataclasses import dataclass, field
from functools import cached_property

from app.core import metrics
from app.core.resources import Resources
from app.core.secret_box import SecretBox
from app.models.types import utcnow
from app.services.outbox import Outbox
from app.services.rate_limit import RateLimiter
from app.services.scheduling.firing_limits import FiringLimits
from app.services.scheduling.firings import fire_due

# A full batch means more may be due: go on, but within one cycle at most this many batches of each.
MAX_BATCHES_PER_CYCLE = 10


@dataclass
class Scheduler:
    resources: Resources
    outbox: Outbox
    limits: FiringLimits = field(init=False)

    def __post_init__(self) -> None:
        settings, names = self.resources.settings, self.resources.names
        limiter = RateLimiter(self.resources.redis_batch, names, settings.rate_limit_per_minute)
        self.limits = FiringLimits(limiter)

    @cached_property
    def box(self) -> SecretBox:
        """Seals the credentials in the payloads of the jobs schedules make."""
        return SecretBox(self.resources.settings.secret_encryption_key)

    async def cycle(self) -> None:
        """One pass over what is due now."""
        stores, names = self.resources.stores, self.resources.names
        size = self.resources.settings.scheduler_batch_size
        for _ in range(MAX_BATCHES_PER_CYCLE):
            if await self.queue_due(size) < size:
                break
        for _ in range(MAX_BATCHES_PER_CYCLE):
            if await fire_due(stores.schedules, stores.jobs, names, self.outbox, size, self.limits, self.box) < size:
                break

    async def queue_due(self, limit: int) -> int:
        """Queue up to `limit` scheduled jobs whose time has come (scheduled -> queued, their audit rows, events
        and lane messages in one transaction), then publish; what the broker does not confirm, the relay sends.
        Returns how many were queued."""
        now = utcnow()
        jobs, staged = await self.resources.stores.jobs.queue_due(now, limit)
        for job in jobs:  # queued when committed: the lag is counted then, not after the publish
            due = job["run_at"] or now
            metrics.scheduler_lag(metrics.DELAYED).observe(max(0.0, (now - due).total_seconds()))
        await self.outbox.publish(staged)
        return len(jobs)
