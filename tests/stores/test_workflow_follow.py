"""What follows a workflow job's outcome, written in the transaction that records it (stores/workflows/follow.py,
DESIGN rule 19), on PostgreSQL and SQLite: a dependent is released once its last dependency's finish commits, with
its lane message staged; two finishes of a dependent's last two dependencies committed at once, by two
connections, release it once; the workflow ends with its event when its last job does; retention takes a
finished workflow once its jobs are gone; the statements render for MSSQL."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import loads
from app.core.names import Names
from app.core.statuses import JobStatus
from app.models.tables import JOB_DEPENDENCIES, JOB_EVENTS, JOBS, OUTBOX, WORKFLOWS
from app.services.upkeep.retention import Retention, emptied_before
from app.stores.artifacts.sql import SqlArtifacts
from app.stores.jobs import JobStore, Outcome
from app.stores.jobs.postgres_follow import FINISH_COUNTED, FINISH_FOLLOWED
from app.stores.workflows.counts import counted_off, tallied
from app.workers.jobs.outcomes import succeeded
from tests.conftest import NS
from tests.support import make_job, statements, stores_for

S = JobStatus
NOW = datetime.now(UTC)


async def a_workflow(engine: AsyncEngine, graph: dict[str, list[str]], running: set[str]) -> dict[str, Any]:
    """A workflow saved as the submit saves it: each ref of `graph` a job waiting for its dependencies, those in
    `running` already claimed; the jobs by ref."""
    workflow_id, client = str(uuid.uuid4()), "c_" + uuid.uuid4().hex[:10]
    ids = {ref: str(uuid.uuid4()) for ref in graph}
    jobs = {}
    for ref, deps in graph.items():
        status = S.RUNNING if ref in running else S.WAITING
        jobs[ref] = make_job(
            id=ids[ref],
            client_id=client,
            status=str(status),
            seq=2 if ref in running else 1,
            runs=1 if ref in running else 0,
            attempts=1 if ref in running else 0,
            workflow_id=workflow_id,
            ref=ref,
            depends_on=[ids[d] for d in deps],
            deps_left=len(deps),
        )
    row = {
        "id": workflow_id,
        "client_id": client,
        "name": None,
        "status": "running",
        "on_failure": "cancel_dependents",
        "jobs_total": len(graph),
        "unfinished": len(graph),
        "seq": 0,
        "request_id": None,
        "created_at": NOW,
        "updated_at": NOW,
        "finished_at": None,
    }
    edges = [
        {"depends_on_id": ids[d], "job_id": ids[r], "workflow_id": workflow_id} for r, ds in graph.items() for d in ds
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(WORKFLOWS), [row])
        await conn.execute(insert(JOBS), list(jobs.values()))
        if edges:
            await conn.execute(insert(JOB_DEPENDENCIES), edges)
    return {"id": workflow_id, "jobs": jobs}


async def statuses(engine: AsyncEngine, workflow: dict[str, Any]) -> dict[str, str]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(JOBS.c.ref, JOBS.c.status).where(JOBS.c.workflow_id == workflow["id"]))
        return {row.ref: row.status for row in rows}


async def releases_of(engine: AsyncEngine, job_id: str) -> tuple[int, int]:
    """How many times a job was released (its `pending` audit rows) and how many lane messages were staged for it."""
    async with engine.connect() as conn:
        trail = select(func.count()).where(JOB_EVENTS.c.job_id == job_id, JOB_EVENTS.c.event == "pending")
        staged = select(func.count()).where(OUTBOX.c.message_id == job_id)
        return (await conn.execute(trail)).scalar_one(), (await conn.execute(staged)).scalar_one()


async def set_deps_left(engine: AsyncEngine, job_id: str, deps_left: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(update(JOBS).where(JOBS.c.id == job_id).values(deps_left=deps_left))


async def finish(jobs: JobStore, engine: AsyncEngine, *rows: dict[str, Any]) -> list[Any]:
    """Succeed these running jobs (read again, as their claim left them) in one finish batch: what followed."""
    async with engine.connect() as conn:
        found = await jobs.read(conn, [row["id"] for row in rows])
    recorded, followed = await jobs.finish([succeeded(found[row["id"]], {"ref": row["ref"]}) for row in rows])
    assert all(recorded)
    return followed


async def test_a_diamond_releases_each_dependent_once_its_last_dependency_succeeded(engine: AsyncEngine) -> None:
    jobs = stores_for(engine, Names(NS)).jobs
    workflow = await a_workflow(engine, {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}, running={"a"})
    j = workflow["jobs"]

    followed = await finish(jobs, engine, j["a"])
    assert await statuses(engine, workflow) == {"a": "succeeded", "b": "pending", "c": "pending", "d": "waiting"}
    lane = sorted(p.message.message_id for p in followed if p.job_id is not None)
    assert lane == sorted([j["b"]["id"], j["c"]["id"]])  # each released job's message, owned by its job
    events = sorted(loads(p.message.body)["type"] for p in followed if p.job_id is None)
    assert events == ["job.pending", "job.pending"]

    await jobs.claim([j["b"]["id"], j["c"]["id"]])
    assert await finish(jobs, engine, j["b"], j["c"])  # both in one batch: d is counted off twice, released once
    assert await releases_of(engine, j["d"]["id"]) == (1, 1)
    await jobs.claim([j["d"]["id"]])
    followed = await finish(jobs, engine, j["d"])

    ends = [loads(p.message.body) for p in followed if p.message.routing_key.startswith("workflow.")]
    assert [(e["type"], e["data"]["workflow"]["counts"]) for e in ends] == [("workflow.succeeded", {"succeeded": 4})]
    async with engine.connect() as conn:
        row = (await conn.execute(select(WORKFLOWS).where(WORKFLOWS.c.id == workflow["id"]))).one()
    assert (row.status, row.unfinished, row.seq) == ("succeeded", 0, 1) and row.finished_at is not None


async def test_a_dead_letter_cancels_its_whole_downstream_in_its_own_transaction(engine: AsyncEngine) -> None:
    jobs = stores_for(engine, Names(NS)).jobs
    workflow = await a_workflow(engine, {"a": [], "b": ["a"], "c": ["b"], "x": []}, running={"a", "x"})
    j = workflow["jobs"]
    async with engine.connect() as conn:
        a = (await jobs.read(conn, [j["a"]["id"]]))[j["a"]["id"]]
    values = {"error": {"type": "X", "message": "x"}, "dead_reason": "permanent_error", "finished_at": NOW}
    _, followed = await jobs.finish([Outcome(a, S.DEAD_LETTERED, values, {})])

    assert await statuses(engine, workflow) == {
        "a": "dead_lettered",
        "b": "cancelled",
        "c": "cancelled",
        "x": "running",
    }
    assert sorted(loads(p.message.body)["type"] for p in followed) == ["job.cancelled", "job.cancelled"]
    followed = await finish(jobs, engine, j["x"])
    ends = [loads(p.message.body)["type"] for p in followed if p.message.routing_key.startswith("workflow.")]
    assert ends == ["workflow.failed"]


async def test_two_last_dependencies_finished_at_once_release_their_dependent_once(db: AsyncEngine) -> None:
    """Two connections commit the finishes of b and c at the same moment, round after round: whichever commits
    second reads the first's count (the row lock of the count), so d is released exactly once, never twice and
    never not at all."""
    jobs = stores_for(db, Names(NS)).jobs
    for _ in range(25):
        workflow = await a_workflow(db, {"b": [], "c": [], "d": ["b", "c"]}, running={"b", "c"})
        j = workflow["jobs"]
        await asyncio.gather(finish(jobs, db, j["b"]), finish(jobs, db, j["c"]))
        assert await releases_of(db, j["d"]["id"]) == (1, 1)
        assert (await statuses(db, workflow))["d"] == "pending"


async def test_retention_takes_a_finished_workflow_once_its_jobs_are_gone(engine: AsyncEngine) -> None:
    old = NOW - timedelta(days=40)
    emptied = await a_workflow(engine, {"a": []}, running=set())
    kept = await a_workflow(engine, {"a": []}, running=set())
    async with engine.begin() as conn:
        await conn.execute(
            WORKFLOWS.update()
            .where(WORKFLOWS.c.id.in_([emptied["id"], kept["id"]]))
            .values(status="succeeded", finished_at=old, unfinished=0)
        )
        await conn.execute(JOBS.delete().where(JOBS.c.id == emptied["jobs"]["a"]["id"]))

    retention = Retention(engine, 1000, 1000, batch_size=10, artifact_rows=SqlArtifacts(engine), workflow_days=30)
    await retention.sweep(NOW)

    async with engine.connect() as conn:
        left = set(
            (
                await conn.execute(select(WORKFLOWS.c.id).where(WORKFLOWS.c.id.in_([emptied["id"], kept["id"]])))
            ).scalars()
        )
    assert left == {kept["id"]}  # a job of it is still there: it stays


def test_the_statements_that_follow_an_outcome_render_for_mssql() -> None:
    counted = str(counted_off({"a": -1, "b": -2}).compile(dialect=mssql.dialect()))
    ended = str(tallied({"w": 2}, NOW).compile(dialect=mssql.dialect()))
    empty = str(select(WORKFLOWS.c.id).where(emptied_before(NOW)).compile(dialect=mssql.dialect()))

    assert "OUTPUT inserted.id" in counted and "RETURNING" not in counted and "CASE jobs.id" in counted
    assert ended.startswith("UPDATE workflows SET unfinished=(workflows.unfinished -")
    assert "NOT (EXISTS (SELECT jobs.id" in empty


async def test_on_postgresql_a_leafs_success_and_its_counts_are_one_statement_with_no_transaction(
    db: AsyncEngine,
) -> None:
    """A fan-in's leaf that releases nothing: its finish, its dependent's count and its workflow's count in one
    statement, sent alone in autocommit. The last leaf's statement fails there, having written nothing, and the
    same counts in a transaction say what to release, which follows in that transaction; the next batch then goes
    to a transaction at once."""
    jobs = stores_for(db, Names(NS)).jobs
    workflow = await a_workflow(db, {"a": [], "b": [], "c": [], "z": ["a", "b", "c"]}, running={"a", "b", "c"})
    j = workflow["jobs"]

    with statements(db, autocommit=True) as seen:
        assert await finish(jobs, db, j["a"]) == []
    assert [one for one in seen if not one[0].startswith("SELECT")] == [(FINISH_COUNTED, True)]  # the read: ours
    async with db.connect() as conn:
        deps_left = (await conn.execute(select(JOBS.c.deps_left).where(JOBS.c.id == j["z"]["id"]))).scalar_one()
        unfinished = await conn.execute(select(WORKFLOWS.c.unfinished).where(WORKFLOWS.c.id == workflow["id"]))
        assert (deps_left, unfinished.scalar_one()) == (2, 3)

    await set_deps_left(db, j["z"]["id"], 1)  # as if c had succeeded elsewhere: b is the last
    with statements(db, autocommit=True) as seen:
        followed = await finish(jobs, db, j["b"])
    sent = [one for one in seen if not one[0].startswith("SELECT")]
    assert sent[:2] == [(FINISH_COUNTED, True), (FINISH_FOLLOWED, False)]
    assert [p.message.message_id for p in followed if p.job_id is not None] == [j["z"]["id"]]
    assert await releases_of(db, j["z"]["id"]) == (1, 1)
    assert (await statuses(db, workflow))["z"] == "pending"
    assert jobs.counts_alone is False  # type: ignore[attr-defined]

    with statements(db, autocommit=True) as seen:
        assert await finish(jobs, db, j["c"]) == []
    assert next(one for one in seen if not one[0].startswith("SELECT")) == (FINISH_FOLLOWED, False)
    assert jobs.counts_alone is True  # type: ignore[attr-defined]
