"""The job worker's side of concurrency keys and rate limits (docs/flow-control.md): a keyed job's message is
admitted before its claim, many messages' admissions in one transaction (rule 17); one held back is acked and waits
in the database (rule 18). A releaser task sends the next held job of a key as soon as a run of that key finishes,
and a job held for its rate window as soon as the window lets it start; the `held_release` loop of every process
sweeps whatever these miss (a process that died before its release, a lease that ran out)."""

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import datetime

from loguru import logger

from app.core.database import is_unreachable
from app.core.group_commit import GroupCommit
from app.models.rows import JobRow
from app.models.types import utcnow
from app.services.outbox import Outbox
from app.stores.flow import FlowStore, KeyRef

RELEASE_BATCH = 200


@dataclass
class Admissions:
    store: FlowStore
    outbox: Outbox
    max_batch: int = 128
    idle_seconds: float = 1.0  # how long the releaser sleeps with nothing to release
    _keys: set[KeyRef] = field(default_factory=set)
    _window: datetime | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = False
    _task: "asyncio.Task[None] | None" = None

    def __post_init__(self) -> None:
        self.batches = GroupCommit("job-admissions", self._admit, self.max_batch, is_unreachable)

    async def held(self, job_id: str) -> bool:
        """Whether this keyed job's message found its key full (or its window spent): the job waits in the database
        now and its message is acked. False: the job may go on to its claim (granted a slot, or not waiting)."""
        held = await self.batches.run(job_id)
        if held:
            logger.info("job {} throttled: it waits in the database for its key", job_id)
        return held

    async def _admit(self, job_ids: list[str]) -> list[bool]:
        admission = await self.store.admit(list(dict.fromkeys(job_ids)))
        self.outbox.publish_soon(admission.staged)
        if admission.held_keys:  # a run of their key may have ended while this held them: look again, now
            self._keys |= admission.held_keys
            self._wake.set()
        if admission.next_window is not None:
            self._expect(admission.next_window)
        return [job_id in admission.held for job_id in job_ids]

    def finished(self, jobs: list[JobRow]) -> None:
        """Runs whose outcomes just committed: their keys' next held jobs are released at once."""
        keys = {KeyRef(j["client_id"], j["concurrency_key"]) for j in jobs if j["concurrency_key"] is not None}
        if keys:
            self._keys |= keys
            self._wake.set()

    def _expect(self, at: datetime) -> None:
        if self._window is None or at < self._window:
            self._window = at
            self._wake.set()

    async def _release(self) -> None:
        keys, self._keys = sorted(self._keys), set()
        window, now = self._window, utcnow()
        due = window is not None and window <= now
        if due:
            self._window = None
        if not keys and not due:
            return
        try:
            _, staged = await self.store.release(keys, RELEASE_BATCH)
        except Exception as exc:  # the sweep of every process releases them within a second
            logger.warning("releasing throttled jobs failed; the held_release loop will: {}", exc)
            return
        self.outbox.publish_soon(staged)
        if due:
            upcoming = await self.store.next_window()
            if upcoming is not None:
                self._expect(upcoming)

    async def _run(self) -> None:
        while not self._stopping:
            wait = self.idle_seconds
            if self._window is not None:
                wait = min(wait, max(0.0, (self._window - utcnow()).total_seconds()))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            self._wake.clear()
            if not self._stopping:
                await self._release()

    def start(self) -> None:
        self.batches.reopen()
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="flow-releaser")

    async def stop(self) -> None:
        await self.batches.close()
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
