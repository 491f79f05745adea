"""One heartbeat per process (rule 3, rule 17): every lease this process holds is renewed in the database with
one statement and in Redis with one round trip; a run fenced out by a newer one is stopped."""

import asyncio
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from app.models.rows import JobRow
from app.stores.jobs import JobStore
from app.workers.jobs.locks import JobLocks, Lock


@dataclass(frozen=True)
class Lease:
    job: JobRow  # as claimed: its `runs` is the fencing token
    lock: Lock
    attempt: "asyncio.Task[Any]"


@dataclass
class Leases:
    store: JobStore
    locks: JobLocks
    interval: float
    _held: dict[str, Lease] = field(default_factory=dict)

    def hold(self, lease: Lease) -> None:
        self._held[lease.job["id"]] = lease

    def drop(self, job_id: str) -> None:
        self._held.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._held)

    async def run(self) -> None:
        """Renew every held lease each interval, until cancelled; never dies of an error."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.renew_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next beat tries again; the lease outlives a missed one
                logger.warning("could not renew {} lease(s): {}", len(self._held), exc)

    async def renew_once(self) -> None:
        held = list(self._held.values())
        if not held:
            return
        ours = await self.store.renew([lease.job for lease in held])
        for lease in held:
            if lease.job["id"] not in ours and self._held.get(lease.job["id"]) is lease:
                logger.warning("job {} was taken over by another worker; abandoning this run", lease.job["id"])
                lease.attempt.cancel()
        await self.locks.renew([lease.lock for lease in held if lease.job["id"] in ours])
