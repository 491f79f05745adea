"""Each lane's fair share (docs/flow-control.md): how many of one client's jobs may wait in a lane at once. The
larger of FAIR_SHARE and twice the lane's consumers across every process, so one client alone keeps every
consumer busy, and another client's new job waits behind about two of its jobs per consumer. The consumers are
read from the broker (a passive declare per lane) at most once a `refresh_seconds`, off the caller's path."""

import asyncio
import time
from dataclasses import dataclass, field

from loguru import logger

from app.core.broker import Broker
from app.core.names import Lane, Names

PER_CONSUMER = 2


@dataclass
class LaneShares:
    broker: Broker
    names: Names
    floor: int  # FAIR_SHARE; 0: fair turns are off
    refresh_seconds: float = 1.0
    _consumers: dict[Lane, int] = field(default_factory=dict)
    _read_at: float = float("-inf")
    _reading: "asyncio.Task[None] | None" = None

    @property
    def on(self) -> bool:
        return self.floor > 0

    def share(self, lane: Lane) -> int:
        """The lane's share now (the last count read; a read is started when it is stale)."""
        if time.monotonic() - self._read_at > self.refresh_seconds and self._reading is None:
            self._reading = asyncio.create_task(self._read(), name="lane-shares")
        return max(self.floor, PER_CONSUMER * self._consumers.get(lane, 0))

    async def _read(self) -> None:
        try:
            for lane in Lane:
                counts = await self.broker.queue_counts(self.names.lane_queue(lane))
                if counts is not None:
                    self._consumers[lane] = counts[1]
        except Exception as exc:  # the last counts stand; the next call reads again after a refresh
            logger.warning("the lanes' consumers could not be read: {}", exc)
        finally:
            self._read_at = time.monotonic()
            self._reading = None

    async def close(self) -> None:
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)
