"""This process's share of each endpoint's in-flight cap (rule 11), kept in memory in front of the shared one.

A delivery whose endpoint has all its slots busy in this process waits for one, up to SLOW_SECONDS (only
FIRST_WAIT_SECONDS while the endpoint's speed is not known yet), unless the endpoint is slow: its recent
attempts held a slot longer than SLOW_SECONDS on average, or its busy slots have not moved for that long. Then
it does not wait at all and goes back through a delay tier, so a slow endpoint never holds a consumer another
endpoint needs. (Sending a fast endpoint's deliveries to a delay tier instead would add the tier's seconds to
each.) The cap across processes stays in Redis.
"""

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

SLOW_SECONDS = 0.5  # the longest a consumer waits for a local slot; an endpoint slower than this is not waited for
FIRST_WAIT_SECONDS = 0.05  # the wait while an endpoint's first attempts have not told how fast it is
SMOOTHING = 0.2  # weight of the newest attempt in the running mean
MAX_ENDPOINTS = 10_000  # past this many, an idle endpoint's entry is dropped (its mean is relearnt)


@dataclass
class _Endpoint:
    moved: float  # when a slot was last freed, or first taken
    busy: int = 0
    waiting: int = 0
    mean_seconds: float = 0.0
    freed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class EndpointSlots:
    per_endpoint: int
    clock: Callable[[], float] = time.monotonic
    _endpoints: dict[str, _Endpoint] = field(default_factory=dict)

    def wait_bound(self, key: str) -> float:
        """How long a delivery to this endpoint may wait for a slot here; 0 for a slow endpoint."""
        endpoint = self._endpoints.get(key)
        if endpoint is None or endpoint.mean_seconds == 0.0:
            stuck = endpoint is not None and self.clock() - endpoint.moved > SLOW_SECONDS
            return 0.0 if stuck else FIRST_WAIT_SECONDS
        stuck = self.clock() - endpoint.moved > SLOW_SECONDS
        return 0.0 if endpoint.mean_seconds > SLOW_SECONDS or stuck else SLOW_SECONDS

    def full(self, key: str) -> bool:
        """Whether every slot of the endpoint is busy in this process."""
        endpoint = self._endpoints.get(key)
        return endpoint is not None and endpoint.busy >= self.per_endpoint

    async def take(self, key: str) -> bool:
        """A slot for one attempt, waiting at most `wait_bound`; False when none freed in time."""
        endpoint = self._endpoints.get(key) or self._endpoints.setdefault(key, _Endpoint(self.clock()))
        if endpoint.busy >= self.per_endpoint:
            endpoint.waiting += 1
            try:
                if not await self._wait(endpoint, self.wait_bound(key)):
                    return False
            finally:
                endpoint.waiting -= 1
        endpoint.busy += 1
        if endpoint.busy == 1:
            endpoint.moved = self.clock()  # idle until now: its slots have not been stuck
        return True

    async def _wait(self, endpoint: _Endpoint, bound: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound
        while endpoint.busy >= self.per_endpoint:
            left = deadline - loop.time()
            if left <= 0:
                return False
            endpoint.freed.clear()
            try:
                async with asyncio.timeout(left):
                    await endpoint.freed.wait()
            except TimeoutError:
                return False
        return True

    def give(self, key: str, seconds: float | None) -> None:
        """Free a slot; `seconds` is how long the slot was held for the attempt (None when nothing was sent)."""
        endpoint = self._endpoints[key]
        endpoint.busy -= 1
        if seconds is not None:
            first = endpoint.mean_seconds == 0.0
            endpoint.mean_seconds = seconds if first else (1 - SMOOTHING) * endpoint.mean_seconds + SMOOTHING * seconds
        endpoint.moved = self.clock()
        endpoint.freed.set()
        if endpoint.busy == 0 and endpoint.waiting == 0 and len(self._endpoints) > MAX_ENDPOINTS:
            del self._endpoints[key]
