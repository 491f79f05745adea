"""Stopping the runs of jobs whose cancel was asked for while they ran (CONTRACT.md "Job control"). The request is
kept in the database (`jobs.cancel_requested_at`), where the worker that holds the job's lease reads it when it
renews the lease; the control fanout tells every process at once, the fast path, so a message lost costs time,
never the cancel."""

from dataclasses import dataclass

from loguru import logger

from app.core.broker import Broker, PublishError
from app.core.names import Names
from app.services.worker_directory import StopRuns, send_command


@dataclass(frozen=True)
class RunStops:
    broker: Broker
    names: Names

    async def tell(self, job_ids: list[str]) -> None:
        """Tell every process to stop the runs of these jobs (those asked to stop in the database already)."""
        if not job_ids:
            return
        try:
            await send_command(self.broker, self.names, StopRuns(tuple(job_ids)))
        except PublishError as exc:
            logger.warning(
                "could not tell the workers to stop {} run(s): {}; their leases' renewal will", len(job_ids), exc
            )
