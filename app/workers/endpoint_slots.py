"""This process's share of each endpoint's in-flight cap (rule 11), kept in memory in front of the shared one.

A delivery whose endpoint has all its slots busy in this process waits for one only while the endpoint answers
fast (a slot frees within a few of its recent round trips); for a slow endpoint it does not wait at all, so a
slow endpoint never holds a consumer another endpoint needs. The cap across processes stays in Redis.
"""

import asyncio
from dataclasses import dataclass, field

MAX_WAIT_SECONDS = 0.05  # the longest a consumer waits for a local slot
ROUND_TRIPS_WAITED = 3  # ... and no longer than this many of the endpoint's recent round trips
SMOOTHING = 0.2  # weight of the newest round trip in the running mean


@dataclass
class _Endpoint:
    busy: int = 0
    mean_seconds: float = 0.0
    freed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class EndpointSlots:
    per_endpoint: int
    _endpoints: dict[str, _Endpoint] = field(default_factory=dict)

    def wait_bound(self, key: str) -> float:
        """How long a delivery to this endpoint may wait for a slot here; 0 for a slow endpoint."""
        mean = self._endpoints[key].mean_seconds if key in self._endpoints else 0.0
        bound = ROUND_TRIPS_WAITED * mean
        return bound if bound <= MAX_WAIT_SECONDS else 0.0

    def full(self, key: str) -> bool:
        endpoint = self._endpoints.get(key)
        return endpoint is not None and endpoint.busy >= self.per_endpoint

    async def take(self, key: str) -> bool:
        """A slot for one attempt, waiting at most `wait_bound`; False when none freed in time."""
        endpoint = self._endpoints.setdefault(key, _Endpoint())
        if endpoint.busy >= self.per_endpoint:
            bound = self.wait_bound(key)
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
        endpoint.busy += 1
        return True

    def give(self, key: str, seconds: float | None) -> None:
        """Free a slot; `seconds` is how long the attempt's round trip took (None when nothing was sent)."""
        endpoint = self._endpoints[key]
        endpoint.busy -= 1
        if seconds is not None:
            first = endpoint.mean_seconds == 0.0
            endpoint.mean_seconds = seconds if first else (1 - SMOOTHING) * endpoint.mean_seconds + SMOOTHING * seconds
        endpoint.freed.set()
        if endpoint.busy == 0 and len(self._endpoints) > 10_000:
            del self._endpoints[key]  # bounded memory across many endpoints; the mean is relearnt
