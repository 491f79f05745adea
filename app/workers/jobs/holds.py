"""The job worker's side of held work (DESIGN.md rule 18): which job types are paused, as one process knows them,
and the hold of a paused type's job whose message arrives. A held job waits in the database, its message acked;
the release (services/job_types.release_held) sends it again once its type is resumed."""

import asyncio
import contextlib
from dataclasses import dataclass, field

from loguru import logger

from app.core.database import is_unreachable
from app.core.group_commit import GroupCommit
from app.core.statuses import HeldReason
from app.stores.job_types import JobTypeStore
from app.stores.jobs import JobStore


@dataclass
class PausedTypes:
    """The paused job types, read from the database every `interval` seconds (one read of a few rows): a message's
    check is a set lookup. While the database cannot be read the last known set stands."""

    store: JobTypeStore
    interval: float
    types: frozenset[str] = frozenset()
    _task: "asyncio.Task[None] | None" = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        """Read once now, so the first message is judged by the pauses as they stand, then every interval."""
        self._stopping = asyncio.Event()
        await self.refresh()
        self._task = asyncio.create_task(self._run(), name="paused-job-types")

    async def refresh(self) -> None:
        try:
            self.types = frozenset(await self.store.paused())
        except Exception as exc:  # the database is down, say: the last known set stands until a read succeeds
            logger.warning("the paused job types could not be read; keeping {} as paused: {}", sorted(self.types), exc)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)
            if not self._stopping.is_set():
                await self.refresh()

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


@dataclass
class Holds:
    """Holds the jobs of paused types as their messages arrive, many messages' holds in one transaction (rule 17)."""

    store: JobStore
    paused: PausedTypes
    max_batch: int = 128

    def __post_init__(self) -> None:
        self.batches = GroupCommit("job-holds", self._hold, self.max_batch, is_unreachable)

    async def held(self, job_type: str, job_id: str) -> bool:
        """Whether this message's job waits in the database now: its type is paused and the job, waiting to start,
        is held (by this message or an earlier one); then its message is acked. False, the usual claim follows:
        the type is not paused (a set lookup, all the cost for such a job), the job is past waiting, or the type
        was resumed since this process last read the pauses (the hold reads them again)."""
        if job_type not in self.paused.types:
            return False
        held = await self.batches.run(job_id)
        if held:
            logger.info("job {} held: its type {} is paused", job_id, job_type)
        return held

    async def _hold(self, job_ids: list[str]) -> list[bool]:
        held = await self.store.hold(job_ids, HeldReason.PAUSED)
        return [job_id in held for job_id in job_ids]

    async def start(self) -> None:
        self.batches.reopen()
        await self.paused.start()

    async def stop(self) -> None:
        await self.batches.close()
        await self.paused.stop()
