"""This process's share of each endpoint's in-flight cap (rule 11), kept in memory in front of the shared one.

A delivery whose endpoint has all its slots busy in this process waits for one, up to SLOW_SECONDS (only
FIRST_WAIT_SECONDS while the endpoint's speed is not known yet, extended to SLOW_SECONDS if it shows itself fast
meanwhile), unless the endpoint is slow: its recent
attempts held a slot longer than SLOW_SECONDS on average, or its busy slots have not moved for that long. Then
it does not wait at all and goes back through a delay tier, so a slow endpoint never holds a consumer another
endpoint needs. (Sending a fast endpoint's deliveries to a delay tier instead would add the tier's seconds to
each.) The cap across processes stays in Redis.
"""

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

SLOW_SECONDS = 0.5  # the longest a consumer waits for a local slot; an endpoint slower than this is not waited for
FIRST_WAIT_SECONDS = 0.05  # the wait while an endpoint's first attempts have not told how fast it is
SMOOTHING = 0.2  # weight of the newest attempt in the running mean
MAX_ENDPOINTS = 10_000  # past this many, an idle endpoint's entry is dropped (its mean is relearnt)


@dataclass(frozen=True)
class Slot:
    """One local slot for one attempt. `heir_of`: the delivery whose attempt had just succeeded when it handed
    this slot over, shared slot included (the success closed the circuit, so no admission is asked)."""

    heir_of: str | None = None


@dataclass
class _Endpoint:
    moved: float  # when a slot was last freed, or first taken
    busy: int = 0
    mean_seconds: float = 0.0
    # deliveries waiting for a slot, first come first served; a slot freed goes straight to the first of them
    queue: "deque[tuple[str, asyncio.Future[Slot | None]]]" = field(default_factory=deque)

    def waiter(self) -> "tuple[str, asyncio.Future[Slot | None]] | None":
        while self.queue:
            delivery_id, future = self.queue.popleft()
            if not future.done():  # a waiter that gave up is skipped
                return delivery_id, future
        return None


@dataclass
class _Waiting:
    """One delivery's wait for a slot: its future gets the slot, or None once the wait runs out."""

    future: "asyncio.Future[Slot | None]"
    timer: asyncio.TimerHandle | None = None


@dataclass
class EndpointSlots:
    per_endpoint: int
    clock: Callable[[], float] = time.monotonic
    _endpoints: dict[str, _Endpoint] = field(default_factory=dict)

    def wait_bound(self, key: str) -> float:
        """How long a delivery to this endpoint may wait for a slot here; 0 for a slow endpoint."""
        endpoint = self._endpoints.get(key)
        if self._stuck(endpoint):
            return 0.0
        if endpoint is None or endpoint.mean_seconds == 0.0:
            return FIRST_WAIT_SECONDS
        return 0.0 if endpoint.mean_seconds > SLOW_SECONDS else SLOW_SECONDS

    def full(self, key: str) -> bool:
        """Whether every slot of the endpoint is busy in this process."""
        endpoint = self._endpoints.get(key)
        return endpoint is not None and endpoint.busy >= self.per_endpoint

    def patient_bound(self, key: str) -> float:
        """How long an operator's delivery may wait for a slot here: as for a fast endpoint, whatever the
        endpoint's past attempts took (an outage's timeouts must not keep a recover from going out as fast as the
        endpoint now answers), unless its busy slots have not moved for that long."""
        return 0.0 if self._stuck(self._endpoints.get(key)) else SLOW_SECONDS

    def _stuck(self, endpoint: _Endpoint | None) -> bool:
        """Whether the endpoint's busy slots have not moved for SLOW_SECONDS."""
        return endpoint is not None and self.clock() - endpoint.moved > SLOW_SECONDS

    async def take(self, key: str, delivery_id: str = "", patient: bool = False) -> Slot | None:
        """A slot for one attempt, waiting at most `wait_bound` (`patient_bound` when `patient`) behind those
        already waiting; None when none came in time."""
        endpoint = self._endpoints.get(key) or self._endpoints.setdefault(key, _Endpoint(self.clock()))
        if endpoint.busy < self.per_endpoint:
            endpoint.busy += 1
            if endpoint.busy == 1:
                endpoint.moved = self.clock()  # idle until now: its slots have not been stuck
            return Slot()
        bound = self.patient_bound(key) if patient else self.wait_bound(key)
        if bound <= 0:
            return None
        # Awaited bare, with a timer that answers None when the wait runs out: a slot handed over wakes the waiter
        # in the next turn of the loop (a shielded wait inside asyncio.timeout took two).
        loop = asyncio.get_running_loop()
        waiting = _Waiting(loop.create_future())
        waiting.timer = loop.call_later(bound, self._wait_ran_out, key, waiting, bound)
        endpoint.queue.append((delivery_id, waiting.future))
        try:
            return await waiting.future
        except asyncio.CancelledError:
            # Handed over as we were cancelled (shutting down): pass the local slot on. A shared slot handed with
            # it stays taken in Redis until its lease runs out.
            if waiting.future.done() and not waiting.future.cancelled() and waiting.future.result() is not None:
                self.give(key, None)
            raise
        finally:
            if waiting.timer is not None:
                waiting.timer.cancel()

    def _wait_ran_out(self, key: str, waiting: "_Waiting", waited: float) -> None:
        if waiting.future.done():
            return
        more = self.wait_bound(key) - waited
        if more > 0:
            # It began waiting before the endpoint's speed was known, and the endpoint has shown itself fast
            # since: wait as long as for a fast endpoint (a burst at start-up is not sent to a tier).
            loop = asyncio.get_running_loop()
            waiting.timer = loop.call_later(more, self._wait_ran_out, key, waiting, waited + more)
        else:
            waiting.future.set_result(None)  # done: the slot freed next goes to the one behind it

    def give(self, key: str, seconds: float | None, succeeded: str | None = None) -> str | None:
        """Free a slot; `seconds` is how long it was held for the attempt (None when nothing was sent). A waiting
        delivery gets it at once. `succeeded`: the id of the delivery whose attempt just succeeded: its shared
        slot goes with the local one, and the heir's id is returned so the success's result can say so."""
        endpoint = self._endpoints[key]
        if seconds is not None:
            first = endpoint.mean_seconds == 0.0
            endpoint.mean_seconds = seconds if first else (1 - SMOOTHING) * endpoint.mean_seconds + SMOOTHING * seconds
        endpoint.moved = self.clock()
        waiter = endpoint.waiter()
        if waiter is not None:
            heir, future = waiter
            future.set_result(Slot(succeeded))  # busy stays as it is: the slot changes hands
            return heir if succeeded is not None else None
        endpoint.busy -= 1
        if endpoint.busy == 0 and not endpoint.queue and len(self._endpoints) > MAX_ENDPOINTS:
            del self._endpoints[key]
        return None
