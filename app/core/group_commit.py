"""Group commit (DESIGN.md rule 17): many callers' operations share one flush, each caller gets its own outcome.

A caller adds an item and awaits its result. When no flush is in flight the waiting items are flushed at once
(after two turns of the event loop, so operations that became ready together go together: no fixed sleep);
while a flush runs the next batch fills, so batches grow with load, up to `max_batch`. A flush that raises is
retried item by item, so one bad item fails only its own caller. `close` flushes what is waiting.
"""

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from loguru import logger

from app.core import metrics

# Turns of the event loop a batch waits for before its flush, when none is in flight. A caller woken by I/O often
# wakes another before it adds its item (a future handed on, a second answer read): with two turns those join
# too, so batches under load are fewer and larger (bench/README.md, Results). On an idle loop a turn costs
# microseconds, so a lone operation still waits for nothing.
GATHER_TURNS = 2

In = TypeVar("In")
Out = TypeVar("Out")

# Runs a batch and returns one outcome per item, in order; raising fails the batch (then each item runs alone).
Flush = Callable[[list[In]], Awaitable[Sequence[Out]]]
# Whether an error is about the resource, not the item: retrying items one by one would only repeat it.
Systemic = Callable[[BaseException], bool]


class GroupCommitClosed(RuntimeError):
    """The batcher was closed: nothing more is taken."""


def _never(_: BaseException) -> bool:
    return False


@dataclass
class GroupCommit(Generic[In, Out]):
    """A batcher around one flush function; one flush in flight at a time."""

    name: str
    flush: Flush[In, Out]
    max_batch: int = 256
    systemic: Systemic = _never
    _waiting: list[tuple[In, "asyncio.Future[Out]"]] = field(default_factory=list)
    _flusher: "asyncio.Task[None] | None" = None
    _closed: bool = False
    batches: int = 0
    items: int = 0

    async def run(self, item: In) -> Out:
        """Add one operation and wait for its own outcome (its result, or the error its flush raised)."""
        return await self.submit(item)

    def submit(self, item: In) -> "asyncio.Future[Out]":
        """Add one operation now, behind every one added before it, and return the future of its outcome."""
        if self._closed:
            raise GroupCommitClosed(f"{self.name} is closed")
        future: asyncio.Future[Out] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._drain(), name=f"group-commit-{self.name}")
        return future

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    async def _drain(self) -> None:
        for _ in range(GATHER_TURNS):  # callers woken by the same I/O, and those they wake, join this batch
            await asyncio.sleep(0)
        while self._waiting:
            batch, self._waiting = self._waiting[: self.max_batch], self._waiting[self.max_batch :]
            await self._flush_batch(batch)

    async def _flush_batch(self, batch: list[tuple[In, "asyncio.Future[Out]"]]) -> None:
        self.batches += 1
        self.items += len(batch)
        metrics.batch_sizes(self.name).observe(len(batch))
        started = time.perf_counter()
        try:
            outcomes = await self.flush([item for item, _ in batch])
            metrics.flush_times(self.name).observe(time.perf_counter() - started)
        except asyncio.CancelledError:
            _fail(batch, GroupCommitClosed(f"{self.name} was cancelled during a flush"))
            raise
        except Exception as exc:
            if len(batch) == 1 or self.systemic(exc):
                _fail(batch, exc)
                return
            logger.warning("{}: a batch of {} failed ({}); retrying its items one by one", self.name, len(batch), exc)
            for one in batch:
                await self._flush_batch([one])
            return
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if not future.done():
                future.set_result(outcome)

    def reopen(self) -> None:
        """Take operations again after a `close` (a worker started again)."""
        self._closed = False

    async def close(self) -> None:
        """Take nothing more; flush what is waiting."""
        self._closed = True
        while self._flusher is not None and not self._flusher.done():
            await asyncio.gather(self._flusher, return_exceptions=True)
        if self._waiting:
            await self._drain()


def _fail(batch: Sequence[tuple[object, "asyncio.Future[Out]"]], exc: BaseException) -> None:
    for _, future in batch:
        if not future.done():
            future.set_exception(exc)
