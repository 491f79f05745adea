"""The scheduler's cycle (a background worker of every process that runs it): queue the scheduled jobs that are
due, then fire the recurring schedules that are due. Any number of processes may run it at once."""

from dataclasses import dataclass, field
from functools import cached_property

from app.core.resources import Resources
from app.core.secret_box import SecretBox
from app.services.due_jobs import queue_due
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
        engine, names = self.resources.engine, self.resources.names
        size = self.resources.settings.scheduler_batch_size
        for _ in range(MAX_BATCHES_PER_CYCLE):
            if len(await queue_due(engine, names, self.outbox, size)) < size:
                break
        for _ in range(MAX_BATCHES_PER_CYCLE):
            if await fire_due(engine, names, self.outbox, size, self.limits, self.box) < size:
                break
