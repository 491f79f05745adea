"""The job-type breakers as the job worker asks them: a closed state trusted briefly, outcomes sent in sums."""

import asyncio
import time
from dataclasses import dataclass, field

from app.core.breaker import BreakerState
from app.services.job_type_breakers import Circuit, JobTypeBreakers

TRUST_CLOSED_SECONDS = 0.25  # a worker acts on a closed breaker this long before asking again
FLUSH_SECONDS = 0.25


@dataclass
class BatchedBreakers:
    """The job worker's view of the breakers: it trusts a closed state briefly and sends its successes in sums,
    so a run costs no Redis round trip while all is well. Failures and probes still go at once."""

    breakers: JobTypeBreakers
    _closed_at: dict[str, float] = field(default_factory=dict)
    _tally: dict[str, list[int]] = field(default_factory=dict)
    _flusher: "asyncio.Task[None] | None" = None

    @property
    def cooldown_seconds(self) -> float:
        return self.breakers.cooldown_seconds

    async def check(self, job_type: str) -> Circuit:
        seen = self._closed_at.get(job_type)
        if seen is not None and time.monotonic() - seen < TRUST_CLOSED_SECONDS:
            return Circuit(job_type, BreakerState.CLOSED, 0.0, 0, 0)
        circuit = await self.breakers.check(job_type, take_probe=True)
        if circuit.state is BreakerState.CLOSED:
            self._closed_at[job_type] = time.monotonic()
        return circuit

    async def record(self, job_type: str, ok: bool, probe: bool) -> None:
        if probe:
            await self.breakers.record(job_type, ok, probe=True)
            return
        tally = self._tally.setdefault(job_type, [0, 0])
        tally[0] += 1
        tally[1] += 0 if ok else 1
        if not ok:
            await self.flush()  # a failure may open the circuit: say it now, with the successes before it
        elif self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_later(), name="breaker-tally")

    async def release_probe(self, job_type: str) -> None:
        await self.breakers.release_probe(job_type)

    async def _flush_later(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)
        await self.flush()

    async def flush(self) -> None:
        tallies, self._tally = self._tally, {}
        for job_type, (calls, failures) in tallies.items():
            if await self.breakers.record_counts(job_type, calls, failures) is BreakerState.OPEN:
                self._closed_at.pop(job_type, None)  # stop trusting it: the next run asks
