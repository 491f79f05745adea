"""What follows a workflow job's outcome, written in the transaction that records it (DESIGN rule 19), so a
crash can neither lose it nor do it twice, and two outcomes committed at once by two processes count once each:

- a dependency that lets its dependents go (it succeeded; or, on `continue`, it ended however it did) takes one
  off each dependent's `deps_left` by one UPDATE, which row-locks them: of two transactions that finish a
  dependent's last two dependencies, the second waits for the first and reads its count, so exactly one sees
  0 and releases it (waiting -> pending, its lane message staged in the outbox);
- one that ends dead-lettered or cancelled on `cancel_dependents` cancels every job downstream of it;
- a dead-lettered job sent back to work (replayed) on `continue` counts again for its dependents still waiting;
- the workflow's `unfinished` count moves by the jobs that ended (less those replayed); the transaction that takes
  it to 0 ends the workflow, with its status from its jobs' and its event staged.
"""

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import workflow_event
from app.core.statuses import TERMINAL, JobStatus, OnFailure, WorkflowStatus
from app.models.rows import JobRow, job_row
from app.models.tables import JOB_DEPENDENCIES as DEPS
from app.models.tables import JOBS, WORKFLOWS
from app.models.types import utcnow
from app.stores import steps
from app.stores.jobs import holds
from app.stores.jobs.moves import Change, Move
from app.stores.outbox import Pending

if TYPE_CHECKING:
    from app.stores.jobs.portable import PortableJobs

S = JobStatus


def concerns(moves: Iterable[Move]) -> bool:
    """Whether any of these moves has consequences in a workflow (a workflow's job ended, or was replayed)."""
    return any(m.after.get("workflow_id") and (m.after["status"] in TERMINAL or _replayed(m)) for m in moves)


def _workflow(job: JobRow) -> str:
    workflow_id = job["workflow_id"]
    assert workflow_id is not None  # only a workflow's jobs are followed
    return workflow_id


def _replayed(move: Move) -> bool:
    return move.source == S.DEAD_LETTERED and move.after["status"] == S.QUEUED


async def follow(jobs: "PortableJobs", conn: AsyncConnection, moves: list[Move]) -> list[Pending]:
    """Everything that follows `moves` (made in `conn`'s transaction) in their workflows, written there: the moves
    it makes recorded, and the messages and events to publish once it commits."""
    mine = [m for m in moves if m.after.get("workflow_id")]
    ended = [m.after for m in mine if m.after["status"] in TERMINAL]
    replayed = [m.after for m in mine if _replayed(m)]
    if not ended and not replayed:
        return []
    # A success lets its dependents go whatever the workflow's policy: read the policies only when it matters.
    asked = [job for job in ended if job["status"] != S.SUCCEEDED] + replayed
    policies = await _policies(conn, {_workflow(job) for job in asked}) if asked else {}

    def on(job: JobRow, policy: OnFailure) -> bool:
        return policies.get(_workflow(job)) == policy

    failed = [j for j in ended if j["status"] != S.SUCCEEDED and on(j, OnFailure.CANCEL_DEPENDENTS)]
    let_go = [j for j in ended if j["status"] == S.SUCCEEDED or on(j, OnFailure.CONTINUE)]
    cancelled = await _cancel_downstream(jobs, conn, failed)
    released = await _count_down(jobs, conn, [j["id"] for j in let_go], -1)
    await _count_down(jobs, conn, [j["id"] for j in replayed if on(j, OnFailure.CONTINUE)], +1)
    pending = await _written(jobs, conn, cancelled, released)
    left = Counter(_workflow(job) for job in [*ended, *(m.after for m in cancelled)])
    left.subtract(_workflow(job) for job in replayed)
    pending += await _tally(jobs, conn, left, {_workflow(job) for job in replayed})
    return pending


async def after_counts(
    jobs: "PortableJobs", conn: AsyncConnection, ready: list[str], workflows: list[str]
) -> list[Pending]:
    """What follows successes whose counts a statement in `conn`'s transaction moved already (PostgreSQL's finish,
    jobs/postgres_follow.py): the dependents it counted to 0 released, and the workflows whose counts change their
    status settled (`_settled`: a running one with no unfinished job left ends). The messages and events to
    publish once it commits."""
    rows = await _locked(conn, sorted(ready)) if ready else []
    released = await jobs.cas(conn, steps.RELEASE, [Change(row) for row in rows])
    pending = await _written(jobs, conn, [], released)
    if workflows:
        query = select(WORKFLOWS).where(WORKFLOWS.c.id.in_(sorted(workflows)))
        pending += await _settled(jobs, conn, [dict(row._mapping) for row in await conn.execute(query)], utcnow())
    return pending


async def _written(
    jobs: "PortableJobs", conn: AsyncConnection, cancelled: list[Move], released: list[Move]
) -> list[Pending]:
    """The moves' audit rows and events, and each released job's lane message (owned by its job: its publish
    queues it), staged."""
    pending = [event for _, event in await jobs.record(conn, [*cancelled, *released])]
    if released:
        ready = [m.after for m in released]
        pending += await jobs.outbox.stage(conn, holds.lane_messages(jobs.names, ready), [job["id"] for job in ready])
    return pending


async def _policies(conn: AsyncConnection, workflow_ids: set[str]) -> dict[str, OnFailure]:
    query = select(WORKFLOWS.c.id, WORKFLOWS.c.on_failure).where(WORKFLOWS.c.id.in_(sorted(workflow_ids)))
    return {row.id: OnFailure(row.on_failure) for row in await conn.execute(query)}


async def _cancel_downstream(jobs: "PortableJobs", conn: AsyncConnection, failed: list[JobRow]) -> list[Move]:
    """Every job downstream of `failed` that has not started -> cancelled (the workflows' graphs read whole: a
    workflow has at most a few hundred jobs)."""
    if not failed:
        return []
    query = select(DEPS.c.job_id, DEPS.c.depends_on_id).where(
        DEPS.c.workflow_id.in_(sorted({_workflow(job) for job in failed}))
    )
    dependents: dict[str, list[str]] = defaultdict(list)
    for row in await conn.execute(query):
        dependents[row.depends_on_id].append(row.job_id)
    downstream: set[str] = set()
    frontier = [job["id"] for job in failed]
    while frontier:
        found = {child for parent in frontier for child in dependents.get(parent, ())} - downstream
        downstream |= found
        frontier = list(found)
    if not downstream:
        return []
    rows = await _locked(conn, sorted(downstream))
    now = utcnow()
    values = {"finished_at": now, "lease_until": None, "held": None}
    why = {"reason": "dependency_failed"}
    changes = [Change(row, values, why) for row in rows if row["status"] in steps.CANCEL.sources]
    return await jobs.cas(conn, steps.CANCEL, changes)


async def _count_down(jobs: "PortableJobs", conn: AsyncConnection, parents: list[str], by: int) -> list[Move]:
    """Each dependent of `parents` still waiting counts them off (`by` -1) or back on (+1); those whose count
    reaches 0 are released (waiting -> pending): the moves made."""
    if not parents:
        return []
    counted = await jobs.counts.count_off(conn, parents, by)
    ready = [job for job in counted if job["deps_left"] is not None and job["deps_left"] <= 0]
    return await jobs.cas(conn, steps.RELEASE, [Change(job) for job in ready]) if by < 0 else []


async def _locked(conn: AsyncConnection, job_ids: list[str]) -> list[JobRow]:
    """The jobs, row-locked in id order until the transaction ends (FOR UPDATE on PostgreSQL; SQLite's write
    transactions hold the database, and MSSQL's UPDATEs lock what they change)."""
    query = select(JOBS).where(JOBS.c.id.in_(job_ids)).order_by(JOBS.c.id).with_for_update()
    return [job_row(row._mapping) for row in await conn.execute(query)]


async def _tally(jobs: "PortableJobs", conn: AsyncConnection, left: Counter[str], replayed: set[str]) -> list[Pending]:
    """Each workflow's count of unfinished jobs moved by `left`'s negation; a workflow that reaches 0 ends (its
    status from its jobs', its event staged), one with a job replayed runs again."""
    ids = sorted(w for w in left if left[w] != 0)
    now = utcnow()
    rows = await jobs.counts.tally(conn, {w: left[w] for w in ids}, now) if ids else []
    if others := sorted(replayed - set(ids)):  # a workflow whose replay and end cancel out: read as it is
        rows += [dict(r._mapping) for r in await conn.execute(select(WORKFLOWS).where(WORKFLOWS.c.id.in_(others)))]
    return await _settled(jobs, conn, rows, now)


async def _settled(jobs: "PortableJobs", conn: AsyncConnection, rows: list[dict[str, Any]], now: Any) -> list[Pending]:
    """Each workflow (a row after its count moved) that has no unfinished job left ended, each with some running
    again; the events to publish."""
    staged: list[Pending] = []
    for workflow in sorted(rows, key=lambda row: str(row["id"])):
        if workflow["unfinished"] <= 0 and workflow["status"] == WorkflowStatus.RUNNING:
            staged += await _end(jobs, conn, workflow, now)
        elif workflow["unfinished"] > 0 and workflow["status"] != WorkflowStatus.RUNNING:
            running = {"status": str(WorkflowStatus.RUNNING), "finished_at": None, "seq": workflow["seq"] + 1}
            await conn.execute(update(WORKFLOWS).where(WORKFLOWS.c.id == workflow["id"]).values(**running))
    return staged


async def _end(jobs: "PortableJobs", conn: AsyncConnection, workflow: dict[str, Any], now: Any) -> list[Pending]:
    counts = (await job_counts(conn, [workflow["id"]]))[workflow["id"]]
    status = final_status(counts)
    ended = {"status": str(status), "finished_at": now, "updated_at": now, "seq": workflow["seq"] + 1}
    await conn.execute(update(WORKFLOWS).where(WORKFLOWS.c.id == workflow["id"]).values(**ended))
    event = workflow_event(jobs.names, {**workflow, **ended, "counts": counts})
    return await jobs.outbox.stage(conn, [event])


async def job_counts(conn: AsyncConnection, workflow_ids: list[str]) -> dict[str, dict[str, int]]:
    """Each workflow's jobs by status, in one grouped read (a workflow with no job left: no counts)."""
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    query = (
        select(JOBS.c.workflow_id, JOBS.c.status, func.count().label("n"))
        .where(JOBS.c.workflow_id.in_(workflow_ids))
        .group_by(JOBS.c.workflow_id, JOBS.c.status)
    )
    for row in await conn.execute(query):
        counts[row.workflow_id][row.status] = int(row.n)
    return counts


def final_status(counts: dict[str, int]) -> WorkflowStatus:
    """A finished workflow's status from its jobs': failed if any is dead-lettered, cancelled if any is cancelled,
    succeeded when every one succeeded."""
    if counts.get(S.DEAD_LETTERED):
        return WorkflowStatus.FAILED
    if counts.get(S.CANCELLED):
        return WorkflowStatus.CANCELLED
    return WorkflowStatus.SUCCEEDED
