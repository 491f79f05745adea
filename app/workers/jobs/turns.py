"""The job worker's side of fair turns (docs/flow-control.md): a claimed job whose message says its client has jobs
waiting their turn frees room in its client's share of the lane, so a releaser task sends the next of them, many
claims' releases in one transaction, once a quarter of the share has room (a release's statements are paid for
a few jobs at once; the three quarters left keep every consumer busy meanwhile). The `held_release` loop of every
process sweeps what this misses."""

import asyncio
import contextlib
from dataclasses import dataclass, field

from loguru import logger

from app.core.messages import JobMessage
from app.core.names import lane_of
from app.services.fairness import Fairness
from app.stores.flow.fair import LaneRef

LEAST = 0.25  # of the share: the room a release waits for


@dataclass
class Turns:
    fairness: Fairness
    _lanes: set[LaneRef] = field(default_factory=set)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: bool = False
    _task: "asyncio.Task[None] | None" = None

    def claimed(self, message: JobMessage) -> None:
        """A job of this message's client left its lane: its next job waiting its turn may go."""
        if message.fair:
            self._lanes.add(LaneRef(message.client_id, lane_of(message.priority)))
            self._wake.set()

    async def _run(self) -> None:
        while not self._stopping:
            await self._wake.wait()
            self._wake.clear()
            lanes, self._lanes = sorted(self._lanes), set()
            if not lanes:
                continue
            try:
                await self.fairness.release(lanes, LEAST)
            except Exception as exc:  # the sweep of every process releases them within a pass
                logger.warning("releasing jobs waiting their turn failed; the held_release loop will: {}", exc)

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="fair-turns")

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
