"""The job path's group commits (rule 17): claims and outcomes of many messages, each batch one transaction,
its Redis locks taken and released in one round trip, its events published together after the commit."""

import asyncio
from dataclasses import dataclass, field

from loguru import logger

from app.core import metrics, tracing
from app.core.database import is_unreachable
from app.core.failpoints import Failpoint, Failpoints
from app.core.group_commit import GroupCommit
from app.core.names import Names
from app.services.outbox import Outbox
from app.stores.jobs import Admit, JobStore, Outcome
from app.stores.outbox import Pending
from app.workers.jobs.claims import Early, claim_queued, claim_rest
from app.workers.jobs.flow import Admissions
from app.workers.jobs.locks import Held, JobLocks, Lock
from app.workers.verdicts import Claimed, Defer, Drop, ToDeadLetters, Verdict

ClaimOutcome = tuple[Verdict, Lock]
Finishing = tuple[Outcome, Lock, dict[str, str] | None]  # an outcome, its run's lock, its trace context
THROTTLED = "job is throttled: it waits in the database for its concurrency key or rate window"


@dataclass
class JobBatches:
    store: JobStore
    locks: JobLocks
    names: Names
    outbox: Outbox
    # Keyed jobs' admission, in the claim's transaction; told the jobs whose outcomes each batch recorded, once it
    # committed (their keys' next held jobs go then).
    admissions: Admissions
    max_batch: int = 128
    failpoints: Failpoints = field(default_factory=Failpoints)

    def __post_init__(self) -> None:
        self._releasing: set[asyncio.Task[None]] = set()
        self.claims = GroupCommit("job-claims", self._claim_items, self.max_batch, is_unreachable)
        self.finishes = GroupCommit("job-finishes", self._finish, self.max_batch, is_unreachable)

    async def claim(self, job_id: str, keyed: bool = False) -> ClaimOutcome:
        """Lock and claim one job (`keyed`: admitted first, for its concurrency key or rate window), batched with
        whatever else arrives meanwhile."""
        return await self.claims.run((job_id, keyed))

    async def _claim_items(self, items: list[tuple[str, bool]]) -> list[ClaimOutcome]:
        return await self.claim_batch([job_id for job_id, _ in items], {job_id for job_id, keyed in items if keyed})

    async def finish(self, outcome: Outcome, lock: Lock) -> Pending | None:
        """Record one run's outcome (None when fenced out) and release its lock, batched; its event carries the
        caller's trace context (when tracing is on)."""
        return await self.finishes.run((outcome, lock, tracing.headers() or None))

    async def claim_batch(self, job_ids: list[str], keyed: set[str] | None = None) -> list[ClaimOutcome]:
        """A batch of claims, as `claims` flushes it (`claim` batches one with whatever else arrives). Locks and
        the common claim at once (one Redis round trip beside one statement, where the database takes it; the
        `keyed` jobs' admission first in its transaction, and those it holds back dropped: they wait in the
        database); then the jobs that claim did not take, unless another worker holds their lock."""
        keys = [self.names.job_lock_key(job_id) for job_id in job_ids]
        admit = Admit(sorted(keyed), self.admissions.store.admit_in) if keyed else None
        claiming = claim_queued(self.store, list(dict.fromkeys(job_ids)), admit)
        locked, queued = await asyncio.gather(self.locks.acquire(keys), claiming, return_exceptions=True)
        if isinstance(locked, BaseException):
            raise locked  # acquire reports Redis down as NO_REDIS: this is a bug, not an outage
        if isinstance(queued, BaseException):
            await self.locks.release(locked)
            raise queued
        if keyed:
            self.admissions.admitted(queued.admission)
        verdicts = self._early_verdicts(job_ids, locked, queued)
        try:
            rest = [j for j, v in zip(job_ids, verdicts, strict=True) if v is None]
            decided = iter(await claim_rest(self.store, rest, queued) if rest else [])
        except BaseException:
            await self.locks.release(locked)
            raise
        final = [v if v is not None else next(decided) for v in verdicts]
        if any(isinstance(v, Claimed) for v in final):
            self.failpoints.hit(Failpoint.AFTER_CLAIM_COMMIT)
        await self.locks.release([lock for v, lock in zip(final, locked, strict=True) if not isinstance(v, Claimed)])
        self.outbox.publish_soon([p for v in final if isinstance(v, Claimed | ToDeadLetters | Drop) for p in v.events])
        return list(zip(final, locked, strict=True))

    def _early_verdicts(self, job_ids: list[str], locked: list[Lock], queued: Early) -> list[Verdict | None]:
        """What the common claim and the locks decided for each message; None: the job is read and judged."""
        verdicts: list[Verdict | None] = []
        seen: set[str] = set()
        for job_id, lock in zip(job_ids, locked, strict=True):
            if job_id in seen:  # a duplicate message in the same batch: the first one decides
                verdicts.append(Defer(lock.seconds_left if lock.held is Held.THEIRS else self.store.lease_seconds))
            elif job_id in queued.admission.held:
                verdicts.append(Drop(THROTTLED))
            elif job_id in queued.claimed:  # queued and now ours in the database, which is the truth (rule 3)
                verdicts.append(queued.claimed[job_id])
            elif lock.held is Held.THEIRS:
                verdicts.append(Defer(lock.seconds_left))
            else:
                verdicts.append(None)
            seen.add(job_id)
        return verdicts

    async def _finish(self, items: list[Finishing]) -> list[Pending | None]:
        ahead = self.admissions.look_ahead([outcome.job for outcome, _, _ in items])
        try:
            recorded, followed = await self.store.finish([outcome for outcome, _, _ in items])
        except BaseException:
            if ahead is not None:
                ahead.cancel()
            raise
        for (_, _, trace), staged in zip(items, recorded, strict=True):
            if trace and staged is not None:  # tracing on: the event continues the run's trace
                staged.message.headers.update(trace)
        done = [outcome for (outcome, _, _), staged in zip(items, recorded, strict=True) if staged is not None]
        metrics.count_outcomes((outcome.job["job_type"], outcome.to) for outcome in done)
        self.admissions.finished([outcome.job for outcome in done], ahead)
        if any(staged is not None for staged in recorded):
            self.failpoints.hit(Failpoint.AFTER_FINISH_COMMIT)
        self.outbox.publish_soon([*(staged for staged in recorded if staged is not None), *followed])
        self._release_soon([lock for _, lock, _ in items])
        return recorded

    def _release_soon(self, locks: list[Lock]) -> None:
        """Give the locks of finished runs back in the background: the outcome is committed, so nothing waits on
        them but a later run of the same job (a retry, after its delay); a lock never given back expires."""
        task = asyncio.create_task(self.locks.release(locks), name="job-lock-release")
        self._releasing.add(task)
        task.add_done_callback(self._releasing.discard)

    def reopen(self) -> None:
        self.claims.reopen()
        self.finishes.reopen()

    async def close(self) -> None:
        await self.claims.close()
        await self.finishes.close()
        await asyncio.gather(*self._releasing)
        for batcher in (self.claims, self.finishes):
            logger.info("{}: {} item(s) in {} batch(es)", batcher.name, batcher.items, batcher.batches)
