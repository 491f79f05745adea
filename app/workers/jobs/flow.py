"""The job worker's side of concurrency keys and rate limits (docs/flow-control.md): a keyed job's message is
admitted in its claim's transaction, before the claim (the claim batch's, rule 17: workers/jobs/batches.py); one
held back is acked and waits in the database (rule 18). A releaser task sends the next held job of a key as soon as
a run of that key finishes, and a job held for its rate window as soon as the window lets it start; the
`held_release` loop of every process sweeps whatever these miss (a process that died before its release, a lease
that ran out)."""

import asyncio
import contextlib
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from loguru import logger

from app.models.rows import JobRow
from app.models.types import utcnow
from app.services.outbox import Outbox
from app.stores.flow import Admission, FlowStore, KeyRef, Looked

RELEASE_BATCH = 200
# Releases of keys in flight at once: a run's end starts its key's at once rather than wait for the one before it
# (two that meet on a key are ordered by its row lock: flow/postgres_release.py).
RELEASES_IN_FLIGHT = 4
# The keys a worker keeps looking ahead for at most (those with held jobs when it last looked); beyond, it forgets
# them all and learns them again from its admissions: a look ahead saves a round trip, it decides nothing.
BUSY_KEYS_KEPT = 10_000


@dataclass
class Admissions:
    store: FlowStore
    outbox: Outbox
    idle_seconds: float = 1.0  # how long the releaser sleeps with nothing to release
    _keys: set[KeyRef] = field(default_factory=set)
    _window: datetime | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = True  # until `start`: a releaser not started releases nothing (the sweep does)
    _task: "asyncio.Task[None] | None" = None
    _releasing: "set[asyncio.Task[None]]" = field(default_factory=set)
    _busy: set[KeyRef] = field(default_factory=set)  # keys with jobs held the last this process looked

    def admitted(self, admission: Admission) -> None:
        """An admission that just committed (with its claim): what it released goes out, and a key of a job it held
        is looked at again (a run of that key may have ended meanwhile)."""
        self.outbox.publish_soon(admission.staged)
        if admission.held:
            logger.info("throttled (waiting in the database for their keys): {}", sorted(admission.held))
        if admission.held_keys:
            self._keys |= admission.held_keys
            if len(self._busy) > BUSY_KEYS_KEPT:
                self._busy.clear()
            self._busy |= admission.held_keys
            self._start_releases()
        if admission.next_window is not None:
            self._expect(admission.next_window)

    def look_ahead(self, jobs: list[JobRow]) -> "asyncio.Task[Looked | None] | None":
        """Runs whose outcomes are being recorded: the held jobs of their keys that had some when last looked at,
        read meanwhile (`finished` then starts from them, a round trip the fewer after the commit). None: no key
        of theirs had, so the release looks after the commit, as it would anyway (a keyed drain with nothing held
        pays no second look)."""
        keys = _keys_of(jobs) & self._busy
        if not keys or self._stopping:
            return None
        task = asyncio.create_task(self.store.look(sorted(keys), RELEASE_BATCH), name="flow-look")
        task.add_done_callback(_unused)  # its error is the release's to report, if a release awaits it
        return task

    def finished(self, jobs: list[JobRow], ahead: "asyncio.Task[Looked | None] | None" = None) -> None:
        """Runs whose outcomes just committed: their keys' next held jobs are released at once (`ahead`: what
        `look_ahead` read of them)."""
        keys = _keys_of(jobs)
        if keys and ahead is not None and not self._stopping:
            self._track(self._release_keys(sorted(keys), ahead))
        elif keys:
            self._keys |= keys
            self._start_releases()

    def _start_releases(self) -> None:
        """Release the keys waiting for it now, unless RELEASES_IN_FLIGHT are under way: then as the next ends."""
        if self._stopping or not self._keys or len(self._releasing) >= RELEASES_IN_FLIGHT:
            return
        keys, self._keys = sorted(self._keys), set()
        self._track(self._release_keys(keys))

    def _track(self, release: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(release, name="flow-release")
        self._releasing.add(task)
        task.add_done_callback(self._released)

    def _released(self, task: "asyncio.Task[None]") -> None:
        self._releasing.discard(task)
        self._start_releases()

    async def _release_keys(self, keys: list[KeyRef], ahead: "asyncio.Task[Looked | None] | None" = None) -> None:
        try:
            looked = await ahead if ahead is not None else None
            if looked is not None:
                self._busy -= set(keys) - _keys_of(looked.jobs)
            _, staged = await self.store.release(keys, RELEASE_BATCH, looked)
        except Exception as exc:  # the sweep of every process releases them within a second
            logger.warning("releasing throttled jobs failed; the held_release loop will: {}", exc)
            return
        self.outbox.publish_soon(staged)

    def _expect(self, at: datetime) -> None:
        if self._window is None or at < self._window:
            self._window = at
            self._wake.set()

    async def _release_due(self) -> None:
        """Release the jobs held for rate windows that have passed (a release of no key does), once the earliest
        window this process held a job for has; then wait for the next."""
        window = self._window
        if window is None or window > utcnow():
            return
        self._window = None
        await self._release_keys([])
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
                await self._release_due()

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="flow-releaser")
        self._start_releases()  # keys that came before the start

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        while self._releasing:
            await asyncio.gather(*self._releasing, return_exceptions=True)


def _keys_of(jobs: list[JobRow]) -> set[KeyRef]:
    return {KeyRef.of(job) for job in jobs if job["concurrency_key"] is not None}


def _unused(task: "asyncio.Task[Looked | None]") -> None:
    if not task.cancelled():
        task.exception()
