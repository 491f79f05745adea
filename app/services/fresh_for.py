"""A short-lived answer per key, shared by the callers that ask while it is fresh and by those that ask while it is
being computed: N dashboards open on one API process cost one computation per key every few seconds."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
MAX_KEYS = 1000  # answers KeptAndRefreshed keeps (one per client that reads them); past this the oldest go


@dataclass
class FreshFor(Generic[T]):
    """Keeps each key's answer `seconds` after it was asked for (0: never); a failure is not kept."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    entries: dict[Hashable, tuple[float, "asyncio.Future[T]"]] = field(default_factory=dict)

    async def get(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> T:
        """The kept answer for `key` while fresh, else a new one from `compute`."""
        now = self.clock()
        kept = self.entries.get(key)
        if kept is None or kept[0] <= now:
            self._forget_stale(now)
            kept = (now + self.seconds, asyncio.ensure_future(compute()))
            self.entries[key] = kept
        try:
            return await asyncio.shield(kept[1])
        except Exception:
            if self.entries.get(key) is kept:
                del self.entries[key]
            raise

    def _forget_stale(self, now: float) -> None:
        """Drop the answers that are no longer fresh and no longer computing, so the dict holds one per active key."""
        for key in [k for k, (until, task) in self.entries.items() if until <= now and task.done()]:
            del self.entries[key]


@dataclass
class KeptAndRefreshed(Generic[T]):
    """Each key's last answer, served at once however old while a newer one is computed in the background once
    it is `seconds` old; only a key's first call waits for its computation. For figures that cost a scan and may
    lag by a minute (the overview's counts by type)."""

    seconds: float
    clock: Callable[[], float] = time.monotonic
    kept: dict[Hashable, tuple[float, T]] = field(default_factory=dict)
    running: dict[Hashable, "asyncio.Task[T]"] = field(default_factory=dict)

    async def get(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> tuple[T, float]:
        """The answer for `key` and when it was computed (by `clock`)."""
        kept = self.kept.get(key)
        if kept is not None and kept[0] + self.seconds <= self.clock() and key not in self.running:
            self._start(key, compute)
        if kept is not None:
            return kept[1], kept[0]
        task = self.running.get(key) or self._start(key, compute)
        await asyncio.shield(task)
        at, answer = self.kept[key]
        return answer, at

    def _start(self, key: Hashable, compute: Callable[[], Awaitable[T]]) -> "asyncio.Task[T]":
        async def run() -> T:
            try:
                started = self.clock()
                answer = await compute()
                self.kept.pop(key, None)
                self.kept[key] = (started, answer)  # the most recent last, so the least recent go first
                while len(self.kept) > MAX_KEYS:
                    del self.kept[next(iter(self.kept))]
                return answer
            finally:
                self.running.pop(key, None)

        task = asyncio.create_task(run())
        task.add_done_callback(_retrieved)  # a failed refresh is retried at the next call, not logged as lost
        self.running[key] = task
        return task


def _retrieved(task: "asyncio.Task[Any]") -> None:
    if not task.cancelled():
        task.exception()
