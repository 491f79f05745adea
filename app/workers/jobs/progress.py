"""Running jobs' progress (docs/progress.md): each run's latest report kept in memory, written at most once a
second per job, the writes of many jobs one statement (rule 17) behind each run's fencing token (rule 3), each
write followed by its `job.progress` event. The last report is not written here: it rides with the run's
outcome, in the finish batch.

Progress events are published straight after their write, not through the outbox: a report lost to a crash is
replaced by the next one, and the outcome's own event carries the last."""

import asyncio
import math
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from loguru import logger

from app.core.broker import Broker
from app.core.database import is_unreachable
from app.core.group_commit import GroupCommit, GroupCommitClosed
from app.core.messages import progress_event
from app.core.names import Names
from app.handlers.base import ProgressSink
from app.models.rows import JobRow, job_with
from app.models.types import utcnow
from app.stores.jobs import JobStore

INTERVAL_SECONDS = 1.0  # at most one write (and one event) a second per job


@dataclass(frozen=True)
class Report:
    fraction: float
    message: str | None
    at: datetime

    def as_json(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "message": self.message, "updated_at": self.at.isoformat()}


@dataclass
class Run:
    """One run's reports: the latest, when one was last sent to be written, and the write waiting for its turn."""

    job: JobRow  # as claimed: its `runs` is the fencing token
    last: Report | None = None
    written_at: float = -math.inf  # monotonic
    timer: asyncio.TimerHandle | None = None


@dataclass
class Progress:
    store: JobStore
    broker: Broker
    names: Names
    max_batch: int = 128
    interval: float = INTERVAL_SECONDS
    clock: Callable[[], float] = time.monotonic
    _runs: dict[str, Run] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.writes = GroupCommit("job-progress", self._write, self.max_batch, is_unreachable)

    def sink(self, job: JobRow) -> ProgressSink:
        """Where the handler of this run (as claimed) reports to, until `ended`."""
        run = Run(job)
        self._runs[job["id"]] = run
        return lambda fraction, message: self._report(run, Report(fraction, message, utcnow()))

    def ended(self, job: JobRow) -> dict[str, Any] | None:
        """The run (as claimed) is over: nothing more of it is written here. Its last report, for its outcome to
        record (None when it reported nothing)."""
        run = self._runs.get(job["id"])
        if run is None or run.job["runs"] != job["runs"]:
            return None
        del self._runs[job["id"]]
        if run.timer is not None:
            run.timer.cancel()
        return run.last.as_json() if run.last is not None else None

    def _report(self, run: Run, report: Report) -> None:
        run.last = report
        if run.timer is not None:
            return  # a write is due at the end of this second: it takes the latest report then
        wait = run.written_at + self.interval - self.clock()
        if wait <= 0:
            self._send(run)
        else:
            run.timer = asyncio.get_running_loop().call_later(wait, self._send, run)

    def _send(self, run: Run) -> None:
        run.timer = None
        if self._runs.get(run.job["id"]) is not run or run.last is None:
            return  # ended meanwhile: its outcome records the last report
        run.written_at = self.clock()
        # A worker that is stopping takes no more writes: the run's outcome, if it gets one, records the last report.
        with suppress(GroupCommitClosed):
            self.writes.submit((run.job, run.last)).add_done_callback(_logged)

    async def _write(self, items: list[tuple[JobRow, Report]]) -> list[bool]:
        reports = {job["id"]: (job, report) for job, report in items}  # a job twice: its latest report
        written = await self.store.progress({i: (job["runs"], r.as_json()) for i, (job, r) in reports.items()})
        events = [
            progress_event(self.names, job_with(job, progress=report.as_json()), report.at)
            for job_id, (job, report) in reports.items()
            if job_id in written
        ]
        if events:
            failed = [error for error in await self.broker.publish_many(events) if error is not None]
            if failed:
                logger.info("{} progress event(s) not published: {}", len(failed), failed[0])
        return [job["id"] in written for job, _ in items]

    def reopen(self) -> None:
        self.writes.reopen()

    async def close(self) -> None:
        for run in self._runs.values():
            if run.timer is not None:
                run.timer.cancel()
        self._runs.clear()
        await self.writes.close()


def _logged(written: "asyncio.Future[bool]") -> None:
    if not written.cancelled() and (error := written.exception()) is not None:
        logger.warning("a progress report could not be written: {}", error)
