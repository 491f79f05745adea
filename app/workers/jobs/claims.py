"""Rule 4 for a batch of job messages: the common claim in one step (queued -> running), then every other job read
and judged one by one (a due retry or an expired lease is taken over, a spent budget buried, an expired lease of a
job whose cancel was asked for cancelled, the rest dropped, deferred or raced), its moves made by the job store."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.core.failure_groups import group_of
from app.core.statuses import HOLDABLE, DeadReason, JobStatus
from app.models.rows import JobRow
from app.models.tables import JOBS
from app.models.types import utcnow
from app.stores.flow import Admission
from app.stores.jobs import Admit, JobStore
from app.stores.jobs.moves import Change
from app.stores.outbox import Pending
from app.workers.retry_policy import budget
from app.workers.verdicts import Claimed, Defer, Drop, Raced, ToDeadLetters, Verdict

S = JobStatus


@dataclass
class Early:
    """What `claim_queued` did: the jobs it claimed, the events it staged for each job it moved, and what its
    admission did (the keyed jobs it held back wait in the database now)."""

    claimed: dict[str, Claimed]
    events: dict[str, list[Pending]]
    admission: Admission = field(default_factory=Admission)


@dataclass(frozen=True)
class Take:
    """A judged job still to be written: run it, bury it (its budget spent), or stop it (its run lost after its
    cancel was asked for)."""

    job: JobRow
    bury: bool = False
    stop: bool = False


async def claim_queued(store: JobStore, job_ids: list[str], admit: Admit | None = None) -> Early:
    """The common claim alone, in a transaction of its own: the pending among `job_ids` queued, the queued within
    their budget running, each step with its audit row and event. `admit` first, in the same transaction: the
    keyed jobs it holds back are left out."""
    early = Early({}, defaultdict(list))
    if not job_ids:
        return early
    claim = await store.claim(job_ids, admit)
    early.admission = claim.admission
    for job, event in claim.moved:
        early.events[job["id"]].append(event)
        if job["status"] == S.RUNNING:
            early.claimed[job["id"]] = Claimed(job, early.events[job["id"]])
    return early


async def claim_rest(store: JobStore, job_ids: list[str], early: Early) -> list[Verdict]:
    """The jobs `claim_queued` did not claim, read and judged one by one (rule 4) in one transaction; a job it
    queued keeps its queued event before what follows."""
    now = utcnow()
    async with store.transaction() as conn:
        judged = {job_id: _judge(job, now) for job_id, job in (await store.read(conn, job_ids)).items()}
        takes = [v for v in judged.values() if isinstance(v, Take)]
        # Rule 3's compare-and-set: only a due retry or an expired lease may be taken over, and no held job.
        due = (JOBS.c.status != S.RETRYING) | (JOBS.c.next_attempt_at <= now)
        expired = (JOBS.c.status != S.RUNNING) | (JOBS.c.lease_until < now)
        lease = now + timedelta(seconds=store.lease_seconds)
        runs = [_run(t.job, now, lease) for t in takes if not t.bury and not t.stop]
        taken = await store.take_over(conn, runs, (due, expired, JOBS.c.held.is_(None)))
        buried = await store.bury(conn, [_burial(t.job, now) for t in takes if t.bury])
        stopped = await store.stop(conn, [_stop(t.job, now) for t in takes if t.stop], (expired,))
    verdicts: dict[str, Verdict] = {j: Raced() if isinstance(v, Take) else v for j, v in judged.items()}
    verdicts |= {job["id"]: Claimed(job, [staged]) for job, staged in taken}
    verdicts |= {job["id"]: ToDeadLetters([staged], job) for job, staged in buried}
    verdicts |= {job["id"]: Drop("job was cancelled as it ran", [staged]) for job, staged in stopped}
    return [_after(early.events.get(j, []), verdicts.get(j, Drop("no such job"))) for j in job_ids]


def _judge(job: JobRow, now: datetime) -> Verdict | Take:
    status = job["status"]
    if status in (S.SUCCEEDED, S.CANCELLED):
        return Drop(f"job is {status}")
    if status == S.DEAD_LETTERED:
        return ToDeadLetters([])
    if job["held"] is not None and status in (*HOLDABLE, S.RUNNING):  # it waits in the database: its release sends it
        return Drop(f"job is held ({job['held']})")
    if status == S.PENDING:
        return Raced()
    if status == S.SCHEDULED:  # not its time: the scheduler publishes its message when it is due
        return Drop("job is scheduled")
    if status == S.WAITING:  # its dependencies' outcomes release it, with a message of its own
        return Drop("job is waiting for its dependencies")
    lease, due = job["lease_until"], job["next_attempt_at"]
    if status == S.RUNNING and lease is not None and lease > now:
        return Defer((lease - now).total_seconds())
    if status == S.RETRYING and due is not None and due > now:
        return Defer((due - now).total_seconds())
    if status == S.RUNNING and job["cancel_requested_at"] is not None:  # its run was lost after its cancel was asked
        return Take(job, stop=True)
    return Take(job, bury=job["attempts"] >= budget(job["max_retries"]))


def _run(job: JobRow, now: datetime, lease: datetime) -> Change:
    values = {
        "attempts": job["attempts"] + 1,
        "runs": job["runs"] + 1,
        "lease_until": lease,
        "next_attempt_at": None,
        "started_at": job["started_at"] or now,
    }
    return Change(job, values)


def _burial(job: JobRow, now: datetime) -> Change:
    """A worker died on the last attempt: the crash used up the budget, so dead-letter without running."""
    error = {
        "type": "WorkerLost",
        "message": f"the worker running attempt {job['attempts']} stopped without a result",
    }
    values = {"error": error, "dead_reason": str(DeadReason.WORKER_LOST), "finished_at": now, "lease_until": None}
    values["failure_group"] = group_of(job["job_type"], error)
    return Change(job, values, {"error": error})


def _stop(job: JobRow, now: datetime) -> Change:
    return Change(job, {"finished_at": now, "lease_until": None})


def _after(earlier: list[Pending], verdict: Verdict) -> Verdict:
    """A verdict whose events follow `earlier` ones of the same job, staged in the same transaction."""
    if isinstance(verdict, Claimed):
        return Claimed(verdict.job, [*earlier, *verdict.events])
    if isinstance(verdict, ToDeadLetters):
        return ToDeadLetters([*earlier, *verdict.events], verdict.buried)
    return verdict
