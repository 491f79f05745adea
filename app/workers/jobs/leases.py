"""One heartbeat per process (rule 3, rule 17): every lease this process holds is renewed in the database with
one statement and in Redis with one round trip; a run fenced out by a newer one is stopped, and so is one whose
job's cancel was asked for (the renewal is how a lost control message heals)."""

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
    _stopping: set[str] = field(default_factory=set)  # runs stopped for their job's cancel

    def hold(self, lease: Lease) -> None:
        self._held[lease.job["id"]] = lease

    def drop(self, job_id: str) -> None:
        self._held.pop(job_id, None)
        self._stopping.discard(job_id)

    def stop(self, job_id: str) -> bool:
        """Stop the run of `job_id` held here, its job's cancel asked for: whether this process runs it."""
        lease = self._held.get(job_id)
        if lease is None:
            return False
        if job_id not in self._stopping:
            logger.info("job {}: its cancel was asked for; stopping its handler", job_id)
            self._stopping.add(job_id)
            lease.attempt.cancel()
        return True

    def stopping(self, job_id: str) -> bool:
        """Whether the run of `job_id` was stopped for its job's cancel."""
        return job_id in self._stopping

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
        ours, cancelling = await self.store.renew([lease.job for lease in held])
        for lease in held:
            if lease.job["id"] not in ours and self._held.get(lease.job["id"]) is lease:
                logger.warning("job {} was taken over by another worker; abandoning this run", lease.job["id"])
                lease.attempt.cancel()
        for job_id in cancelling:
            self.stop(job_id)
        await self.locks.renew([lease.lock for lease in held if lease.job["id"] in ours])
