"""Waiting for a job's result (`?wait=`): woken by the worker's direct reply when one can come, answered from the
database always. Without a reply to wait for (a GET, a relayed or retried message, a repeated submit) it polls,
50 ms at first and backing off to 500 ms; with one, the poll every 500 ms only covers a reply that is lost."""

import asyncio
from dataclasses import dataclass

from app.core.messages import JobReply
from app.core.replies import ReplyInbox
from app.core.statuses import TERMINAL
from app.models.rows import JobRow
from app.schemas.job import JobOptions, Submitted
from app.services.jobs import JobService
from app.services.tenancy import Principal

FIRST_POLL_SECONDS = 0.05
MAX_POLL_SECONDS = 0.5


@dataclass
class Waiting:
    jobs: JobService
    inbox: ReplyInbox

    async def submit(
        self, principal: Principal, request: JobOptions, request_id: str | None, wait: float | None
    ) -> tuple[JobRow, Submitted]:
        """Submit; with `wait`, answer with the job once it is finished or `wait` seconds have passed."""
        if wait is None:
            return await self.jobs.submit(principal, request, request_id)
        deadline = _deadline(wait)
        with self.inbox.expect() as reply:
            job, outcome = await self.jobs.submit(principal, request, request_id, reply.correlation_id)
            return await self._settled(principal, job, deadline, reply.arrived), outcome

    async def get(self, principal: Principal, job_id: str, wait: float | None) -> JobRow | None:
        """The job; with `wait`, once it is finished or `wait` seconds have passed. None when not the caller's."""
        job = await self.jobs.get(principal, job_id)
        if wait is None or job is None:
            return job
        return await self._settled(principal, job, _deadline(wait), None)

    async def _settled(
        self, principal: Principal, job: JobRow, deadline: float, reply: "asyncio.Future[JobReply] | None"
    ) -> JobRow:
        """Read the job again until it is finished or the deadline has passed (then once more, as it stands)."""
        loop = asyncio.get_running_loop()
        pause = FIRST_POLL_SECONDS if reply is None else MAX_POLL_SECONDS
        while job["status"] not in TERMINAL and (left := deadline - loop.time()) > 0:
            if reply is not None and reply.done():
                reply = None  # heard; should the job have moved on since, polls follow it
            if reply is None:
                await asyncio.sleep(min(pause, left))
            else:
                await asyncio.wait([reply], timeout=min(pause, left))
            pause = min(pause * 2, MAX_POLL_SECONDS)
            job = await self.jobs.get(principal, job["id"]) or job
        return job


def _deadline(wait: float) -> float:
    return asyncio.get_running_loop().time() + wait
