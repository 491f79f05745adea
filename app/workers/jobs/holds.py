"""The job worker's side of held work (DESIGN.md rule 18): which job types are paused, as one process knows them,
the hold of a paused type's job whose message arrives, the hold of a job of a type this process has no handler for
(and the release of those of its own types other workers held), and the releases of keyed jobs (workers/jobs/flow.py;
a keyed job's admission is in its claim's transaction). A held job waits in the database, its message acked; its
release (services/job_types.release_held, the flow releases) sends it again once its reason has passed."""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from loguru import logger

from app.core.database import is_unreachable
from app.core.group_commit import GroupCommit
from app.core.messages import JobMessage
from app.core.resources import Resources
from app.core.statuses import HeldReason
from app.handlers.registry import JOB_TYPES
from app.services.job_types import release_unknown
from app.services.outbox import Outbox
from app.stores.job_types import JobTypeStore
from app.stores.jobs import JobStore
from app.workers.jobs.flow import Admissions


@dataclass
class Periodic:
    """A cycle run once at `start` (so what it reads stands before the first message), then every `interval`
    seconds until `stop`."""

    name: str
    interval: float
    cycle: Callable[[], Awaitable[None]]
    _task: "asyncio.Task[None] | None" = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self._stopping = asyncio.Event()
        await self.cycle()
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.interval)
            if not self._stopping.is_set():
                await self.cycle()

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


@dataclass
class PausedTypes:
    """The paused job types, read from the database every `interval` seconds (one read of a few rows): a message's
    check is a set lookup. While the database cannot be read the last known set stands."""

    store: JobTypeStore
    interval: float
    types: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self._loop = Periodic("paused-job-types", self.interval, self.refresh)

    async def start(self) -> None:
        """Read once now, so the first message is judged by the pauses as they stand, then every interval."""
        await self._loop.start()

    async def refresh(self) -> None:
        try:
            self.types = frozenset(await self.store.paused())
        except Exception as exc:  # the database is down, say: the last known set stands until a read succeeds
            logger.warning("the paused job types could not be read; keeping {} as paused: {}", sorted(self.types), exc)

    async def stop(self) -> None:
        await self._loop.stop()


@dataclass
class UnknownTypes:
    """The jobs of types this process has no handler for (a plugin installed on other workers only, docs/plugins.md):
    held in the database as their messages arrive, never failed, and shown so in their audit trail. Those of the
    types this process has, held by another worker, it releases at its start and every `interval` seconds."""

    jobs: JobStore
    outbox: Outbox
    known: frozenset[str]
    interval: float

    def __post_init__(self) -> None:
        self._loop = Periodic("unknown-types", self.interval, self.release)

    async def held(self, message: JobMessage) -> bool:
        """Whether this message's job is of a type this process has no handler for and waits in the database now
        (False for a job that is not waiting to start any more: its message goes the usual way)."""
        if message.job_type in self.known:
            return False
        held = message.job_id in await self.jobs.hold([message.job_id], HeldReason.UNKNOWN_TYPE)
        if held:
            logger.warning(
                "job {} held: this process has no handler for its type {!r} (installed plugins: see "
                "docs/plugins.md); it waits until a job worker that has the type runs",
                message.job_id,
                message.job_type,
            )
        return held

    async def release(self) -> None:
        """Send the jobs of our types that other workers held back to their lanes."""
        try:
            await release_unknown(self.jobs, self.outbox, self.known)
        except Exception as exc:  # the next pass tries again
            logger.warning("releasing the jobs held for a type other workers lack failed: {}", exc)

    async def start(self) -> None:
        """Release once now (jobs held while no worker had the type), then every interval."""
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()


@dataclass
class Holds:
    """Holds the jobs of paused types as their messages arrive, many messages' holds in one transaction (rule 17),
    and admits keyed jobs."""

    store: JobStore
    paused: PausedTypes
    admissions: Admissions
    unknown: UnknownTypes
    max_batch: int = 128

    def __post_init__(self) -> None:
        self.batches = GroupCommit("job-holds", self._hold, self.max_batch, is_unreachable)

    @classmethod
    def of(cls, resources: Resources, outbox: Outbox) -> "Holds":
        """A job worker's holds: its view of the pauses, and its admissions."""
        settings, stores = resources.settings, resources.stores
        paused = PausedTypes(stores.job_types, settings.pause_refresh_seconds)
        admissions = Admissions(stores.flow, outbox, settings.pause_refresh_seconds)
        known = frozenset(JOB_TYPES)
        unknown = UnknownTypes(stores.jobs, outbox, known, settings.pause_refresh_seconds)
        return cls(stores.jobs, paused, admissions, unknown, settings.job_batch_size)

    async def held(self, message: JobMessage) -> bool:
        """Whether this message's job waits in the database now, its message to be acked: its type is paused and
        the job, waiting to start, is held (by this message or an earlier one), or no handler here knows its type.
        False, the claim follows (a keyed job's admitted first, in its transaction): the type is not paused (a set
        lookup, all the cost for most jobs), the job is past waiting, or its type was resumed since this process
        last read the pauses (the hold reads them again)."""
        if await self.unknown.held(message):
            return True
        if message.job_type in self.paused.types:
            held = await self.batches.run(message.job_id)
            if held:
                logger.info("job {} held: its type {} is paused", message.job_id, message.job_type)
                return True
        return False

    async def _hold(self, job_ids: list[str]) -> list[bool]:
        held = await self.store.hold(job_ids, HeldReason.PAUSED)
        return [job_id in held for job_id in job_ids]

    async def start(self) -> None:
        self.batches.reopen()
        await self.paused.start()
        self.admissions.start()
        await self.unknown.start()

    async def stop(self) -> None:
        await self.batches.close()
        await self.paused.stop()
        await self.admissions.stop()
        await self.unknown.stop()
