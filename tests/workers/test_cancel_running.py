"""Cancelling a running job (CONTRACT.md "Job control"): the API answers 202 and asks the run to stop; the worker
that holds it stops the handler (a CPU-pool job's process killed and replaced) and records `cancelled` from
`running`, fenced like every outcome, so a run that finished first keeps its outcome, a failure is not retried and
a redelivered message is dropped. The store's part on PostgreSQL and SQLite, rendered for MSSQL."""

import base64
import io
import multiprocessing
import os
import time
from datetime import UTC, datetime, timedelta
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from sqlalchemy import insert, select
from sqlalchemy.dialects import mssql
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.models.rows import JobRow
from app.models.tables import JOB_EVENTS, JOBS
from app.stores import steps
from app.stores.jobs import JobStore
from app.stores.jobs.moves import Change, compare_and_set
from app.stores.jobs.portable import FINISH_WHERE, cancel_request
from app.workers.jobs.outcomes import cancelled, retrying, succeeded
from app.workers.jobs.worker import JobWorker
from app.workers.verdicts import Drop
from tests.conftest import NS, REDIS_URL, make_settings
from tests.support import Api, claim_many, make_job, stores_for, trail, until_status, wait_for

NOW = datetime.now(UTC)
TICKS = os.sysconf("SC_CLK_TCK")


def store(engine: AsyncEngine) -> JobStore:
    return stores_for(engine, Names(NS)).jobs


async def running_job(engine: AsyncEngine, **overrides: Any) -> JobRow:
    """A job running its first run, as a claim leaves it, its lease still held."""
    claimed = {"status": "running", "seq": 2, "runs": 1, "attempts": 1, "lease_until": NOW + timedelta(minutes=5)}
    job = make_job(**(claimed | overrides))
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), [job])
    return job  # type: ignore[return-value]


async def ask_cancel(jobs: JobStore, job: JobRow) -> list[JobRow]:
    async with jobs.transaction() as conn:
        return await jobs.request_cancel(conn, [job])


async def status_and_trail(engine: AsyncEngine, job_id: str) -> tuple[str, int, list[tuple[str, str]]]:
    """The job's status and runs, and its audit rows as (event, from)."""
    async with engine.connect() as conn:
        row = (await conn.execute(select(JOBS.c.status, JOBS.c.runs).where(JOBS.c.id == job_id))).one()
        query = select(JOB_EVENTS.c.event, JOB_EVENTS.c.detail).where(JOB_EVENTS.c.job_id == job_id)
        events = [(event, detail["from"]) for event, detail in await conn.execute(query.order_by(JOB_EVENTS.c.id))]
    return row.status, row.runs, events


async def test_a_cancel_request_marks_the_run_without_moving_the_job(engine: AsyncEngine) -> None:
    jobs = store(engine)
    job = await running_job(engine)
    [asked] = await ask_cancel(jobs, job)
    assert (asked["status"], asked["seq"], asked["runs"]) == ("running", 2, 1)  # no status change: seq stays
    first = asked["cancel_requested_at"]
    assert first is not None
    [again] = await ask_cancel(jobs, job)
    assert again["cancel_requested_at"] == first  # the first request's time is kept
    assert await ask_cancel(jobs, {**job, "runs": 2}) == []  # another run's token: not ours to ask
    ours, cancelling = await jobs.renew([job])
    assert (ours, cancelling) == ({job["id"]}, {job["id"]})  # the lease holder sees it as it renews


@pytest.mark.parametrize("first", ["succeeded", "cancelled"])
async def test_a_cancel_racing_the_runs_own_finish_leaves_one_terminal_status(engine: AsyncEngine, first: str) -> None:
    jobs = store(engine)
    job = await running_job(engine)
    await ask_cancel(jobs, job)
    outcomes = {"succeeded": succeeded(job, {"done": True}), "cancelled": cancelled(job)}
    later = "cancelled" if first == "succeeded" else "succeeded"
    won = await jobs.finish([outcomes[first]])
    lost = await jobs.finish([outcomes[later]])
    assert won.recorded[0] is not None and lost.recorded == [None]
    assert await status_and_trail(engine, job["id"]) == (first, 1, [(first, "running")])


async def test_a_run_that_fails_after_its_cancel_was_asked_is_cancelled_not_retried(engine: AsyncEngine) -> None:
    jobs = store(engine)
    job = await running_job(engine)
    await ask_cancel(jobs, job)
    error = {"type": "TransientError", "message": "flaky"}
    refused = await jobs.finish([retrying(job, error, NOW + timedelta(seconds=5))])
    assert refused.recorded == [None]
    recorded = await jobs.finish([cancelled(job)])
    assert recorded.recorded[0] is not None
    assert await status_and_trail(engine, job["id"]) == ("cancelled", 1, [("cancelled", "running")])


async def test_a_job_cancelled_as_it_ran_drops_its_redelivered_message(engine: AsyncEngine) -> None:
    jobs = store(engine)
    job = await running_job(engine)
    await ask_cancel(jobs, job)
    await jobs.finish([cancelled(job)])
    assert await claim_many(engine, Names(NS), REDIS_URL, [job["id"]]) == [Drop("job is cancelled")]
    assert await status_and_trail(engine, job["id"]) == ("cancelled", 1, [("cancelled", "running")])


async def test_a_lost_run_whose_cancel_was_asked_is_cancelled_not_run_again(engine: AsyncEngine) -> None:
    """Its worker died after the request: the next delivery of its message, once the lease has run out, records
    it cancelled rather than taking it over."""
    jobs = store(engine)
    job = await running_job(engine, lease_until=NOW - timedelta(seconds=1))
    await ask_cancel(jobs, job)
    [verdict] = await claim_many(engine, Names(NS), REDIS_URL, [job["id"]])
    assert isinstance(verdict, Drop) and verdict.why == "job was cancelled as it ran" and len(verdict.events) == 1
    assert await status_and_trail(engine, job["id"]) == ("cancelled", 1, [("cancelled", "running")])


def _mssql(statement: Any) -> str:
    return str(statement.compile(dialect=mssql.dialect(), compile_kwargs={"render_postcompile": True}))


def test_the_cancel_statements_render_for_mssql() -> None:
    request = _mssql(cancel_request({"a": 1, "b": 2}, NOW))
    assert "OUTPUT inserted.id" in request and "RETURNING" not in request
    assert "coalesce(jobs.cancel_requested_at" in request.lower() and "CASE jobs.id" in request
    job = make_job(status="running", seq=2, runs=1)
    stop = _mssql(compare_and_set(steps.STOP, [Change(job, {"finished_at": NOW})], NOW))
    assert "AND jobs.status = :status_1" in stop and "OUTPUT inserted.id" in stop  # one source: running
    retry = _mssql(compare_and_set(steps.RETRY, [Change(job)], NOW, FINISH_WHERE[steps.RETRY.target]))
    assert "jobs.cancel_requested_at IS NULL" in retry


# -- through the API, with a job worker in this process ------------------------------------------------------


async def cancel(api: Api, headers: dict[str, str], job_id: str) -> tuple[int, dict[str, Any]]:
    answer = await api.client.post(f"/api/v1/jobs/{job_id}/cancel", headers=headers)
    body: dict[str, Any] = answer.json()
    return answer.status_code, body


async def until_cancelled(api: Api, headers: dict[str, str], job_id: str, within: float) -> float:
    """Wait for the job to end; assert it ended cancelled from running, never retried: the seconds it took."""
    asked = time.monotonic()
    ended = await until_status(api, headers, job_id, within)
    took = time.monotonic() - asked
    assert (ended["status"], ended["attempts"], ended["cancel_requested"]) == ("cancelled", 1, True), ended
    last = (await trail(api, headers, job_id))[-1]
    assert (last["event"], last["detail"]["from"]) == ("cancelled", "running")
    return took


# A lease renewed every 20 s: a cancel within 5 s came by the control fanout, the fast path.
FAST_PATH_ONLY = pytest.mark.parametrize("settings", [make_settings(lock_ttl_seconds=60)])


@FAST_PATH_ONLY
async def test_cancelling_a_running_sleep_stops_it_and_the_worker_runs_on(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("cancel-running-sleep")
    job = (await api.submit(headers, job_type="sleep", payload={"seconds": 60})).json()
    await until_status(api, headers, job["id"], 20, "running")
    status, body = await cancel(api, headers, job["id"])
    assert (status, body["status"], body["cancel_requested"]) == (202, "running", True)
    assert await until_cancelled(api, headers, job["id"], within=5) < 5

    async def released() -> bool:  # the run is gone from the heartbeat once its task resumes after the commit
        return len(worker.leases) == 0

    await wait_for(released, within=5)
    status, body = await cancel(api, headers, job["id"])
    assert (status, body["code"]) == (409, "not_cancellable")
    after = (await api.submit(headers, job_type="echo", payload={"after": "cancel"})).json()
    assert (await until_status(api, headers, after["id"]))["result"] == {"after": "cancel"}


async def test_a_cancel_request_the_worker_did_not_hear_is_seen_at_its_lease_renewal(
    api: Api, worker: JobWorker, db: AsyncEngine
) -> None:
    """No control message: the request is only in the database, and the worker reads it as it renews its lease
    (every lock_ttl / 3 = 1 s in the tests)."""
    headers = await api.new_client("cancel-heal")
    job = (await api.submit(headers, job_type="sleep", payload={"seconds": 60})).json()
    await until_status(api, headers, job["id"], 20, "running")
    jobs = stores_for(db, Names(NS)).jobs
    async with db.connect() as conn:
        row = (await conn.execute(select(JOBS).where(JOBS.c.id == job["id"]))).one()
    assert len(await ask_cancel(jobs, dict(row._mapping))) == 1  # type: ignore[arg-type]
    await until_cancelled(api, headers, job["id"], within=5)


def _pool() -> dict[int, BaseProcess]:
    """The CPU pool's processes of this process's worker, by pid."""
    return {p.pid: p for p in multiprocessing.active_children() if p.name == "cpu-pool" and p.pid is not None}


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def _png(size: int) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), "teal").save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@FAST_PATH_ONLY
async def test_cancelling_a_running_image_job_kills_its_pool_process_and_the_pool_runs_on(
    api: Api, worker: JobWorker
) -> None:
    headers = await api.new_client("cancel-running-image")
    # Many seconds of Pillow in a pool process: an upscale to 4000 px, rotated three times, saved as WEBP.
    heavy = {"image_base64": _png(8), "operations": ["resize", "rotate", "rotate", "rotate"], "width": 4000}
    heavy |= {"height": 4000, "format": "WEBP", "quality": 95, "angle": 33}
    job = (await api.submit(headers, job_type="image", payload=heavy)).json()
    await until_status(api, headers, job["id"], 20, "running")

    async def busy() -> int | None:  # a pool process that has spent 2 s of CPU: the transform is under way
        return next((pid for pid in _pool() if _cpu_seconds(pid) >= 2), None)

    pid = await wait_for(busy, within=60)
    process = _pool()[pid]
    status, body = await cancel(api, headers, job["id"])
    assert (status, body["cancel_requested"]) == (202, True)
    assert await until_cancelled(api, headers, job["id"], within=5) < 5
    assert not process.is_alive()  # killed, not left to finish in the background

    async def replaced() -> bool:
        return len(_pool()) == 2 and pid not in _pool()

    await wait_for(replaced, within=10)
    small = {"image_base64": _png(16), "operations": ["grayscale"]}
    after = (await api.submit(headers, job_type="image", payload=small)).json()
    done = await until_status(api, headers, after["id"], 60)
    assert (done["status"], done["result"]["width"]) == ("succeeded", 16)
