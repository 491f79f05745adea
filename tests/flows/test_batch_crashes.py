"""kill -9 at the two seams group commit opens (rule 17): after a claim batch's commit but before its handlers,
and after a finish batch's commit but before its acks. Every job ends exactly once; redeliveries are dropped."""

import asyncio
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Lane
from app.models.tables import JOBS, OUTBOX
from tests.conftest import make_settings, settings_env
from tests.support import Api, BrokerProbe, app_process, trail, until_status, wait_for

pytestmark = pytest.mark.slow

JOBS_PER_TEST = 6


def one_lane(**overrides: object) -> dict[str, str]:
    """A worker on the default lane only, so the test's jobs are all it sees."""
    lanes = {"job_consumers_default": 3, "job_consumers_critical": 0, "job_consumers_bulk": 0}
    return settings_env(make_settings(**lanes, **overrides))


async def runs_of(db: AsyncEngine, job_ids: list[str]) -> dict[str, int]:
    async with db.connect() as conn:
        rows = await conn.execute(select(JOBS.c.id, JOBS.c.runs).where(JOBS.c.id.in_(job_ids)))
        return {row.id: row.runs for row in rows}


async def submit_batch(api: Api, headers: dict[str, str]) -> list[str]:
    return [(await api.submit(headers, job_type="echo", payload={"n": n})).json()["id"] for n in range(JOBS_PER_TEST)]


async def test_sigkill_after_a_claim_commit_runs_each_job_once_more_and_finishes_it_once(
    api: Api, broker: BrokerProbe, db: AsyncEngine, tmp_path: Path
) -> None:
    headers = await api.new_client("crash-claim")
    lane = broker.topology.names.lane_queue(Lane.DEFAULT)
    await broker.purge(lane)  # earlier tests' leftovers would share the first claim batch
    ids = await submit_batch(api, headers)  # queued before any worker runs, so one claim batch takes several
    with app_process(["worker", "jobs"], one_lane(failpoints="after_claim_commit"), tmp_path / "a.log") as first:
        exit_code = first.popen.wait(30)
        assert exit_code == -9, first.output()  # it killed itself right after committing its first claims
    claimed = await runs_of(db, ids)
    assert 1 in claimed.values(), claimed  # at least one claim committed, its handler never ran
    with app_process(["worker", "jobs"], one_lane(lock_ttl_seconds=2), tmp_path / "b.log") as second:
        for job_id in ids:
            done = await until_status(api, headers, job_id, 40)
            assert done["status"] == "succeeded", second.output()
        await wait_for(lambda: _lane_empty(lane), within=30, interval=0.5)
    runs = await runs_of(db, ids)
    for job_id in ids:
        events = [e["event"] for e in await trail(api, headers, job_id)]
        assert events.count("succeeded") == 1
        assert runs[job_id] == claimed[job_id] + 1  # claimed again once its lease expired, never twice
        assert events.count("running") == runs[job_id]


async def test_sigkill_after_a_finish_commit_drops_the_redelivered_messages(
    api: Api, broker: BrokerProbe, db: AsyncEngine, tmp_path: Path
) -> None:
    headers = await api.new_client("crash-finish")
    lane = broker.topology.names.lane_queue(Lane.DEFAULT)
    await broker.purge(lane)
    ids = await submit_batch(api, headers)
    await wait_for(lambda: _published(db, ids), within=30)  # the API and the relay may both publish a job: both done
    queued = await broker.depth(lane)
    assert queued >= JOBS_PER_TEST
    with app_process(["worker", "jobs"], one_lane(failpoints="after_finish_commit"), tmp_path / "a.log") as first:
        assert first.popen.wait(30) == -9, first.output()
    async with db.connect() as conn:
        rows = await conn.execute(select(JOBS.c.id, JOBS.c.status).where(JOBS.c.id.in_(ids)))
        finished = [row.id for row in rows if row.status == "succeeded"]
    assert finished, "the first finish batch committed before the crash"
    assert await broker.depth(lane) == queued  # none acked: every message is back in the lane
    with app_process(["worker", "jobs"], one_lane(), tmp_path / "b.log") as second:
        await wait_for(lambda: _lane_empty(lane), within=30, interval=0.5)
        for job_id in ids:
            assert (await until_status(api, headers, job_id, 30))["status"] == "succeeded", second.output()
    runs = await runs_of(db, ids)
    for job_id in finished:
        assert runs[job_id] == 1  # recorded before the crash: its redelivered message was dropped, not run
        events = [e["event"] for e in await trail(api, headers, job_id)]
        assert (events.count("running"), events.count("succeeded")) == (1, 1)


async def _published(db: AsyncEngine, job_ids: list[str]) -> bool:
    """No outbox row of these jobs is left: every publish of theirs is confirmed."""
    async with db.connect() as conn:
        query = select(func.count()).select_from(OUTBOX).where(OUTBOX.c.job_id.in_(job_ids))
        return (await conn.execute(query)).scalar_one() == 0


async def _lane_empty(lane: str) -> bool:
    """No message in the lane, ready or delivered and unacked (what `rabbitmqctl` calls `messages`)."""
    listing = await asyncio.to_thread(
        subprocess.run,
        ["rabbitmqctl", "-q", "list_queues", "name", "messages"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    counts = dict(line.split("\t") for line in listing.stdout.splitlines() if "\t" in line)
    return counts.get(lane) == "0"
