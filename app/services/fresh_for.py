"""A short-lived answer per key, shared by the callers that ask while it is fresh and by those that ask while it is
being computed: N dashboards open on one API process cost one computation per key every few seconds."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


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
