"""Workflows through crashes, with worker processes of their own: a worker killed with SIGKILL between a finish
batch's commit and its acks leaves each dependent released once and run once, never before its dependencies
succeeded; two worker processes finishing a fan-in's many dependencies at once release its last job once."""

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import JOB_EVENTS, JOBS
from tests.conftest import make_settings, settings_env
from tests.flows.test_batch_crashes import one_lane
from tests.support import Api, app_process, wait_for

pytestmark = pytest.mark.slow


async def submit(api: Api, headers: dict[str, str], jobs: list[dict[str, Any]]) -> dict[str, Any]:
    answer = await api.client.post("/api/v1/workflows", json={"jobs": jobs}, headers=headers)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def ended(api: Api, headers: dict[str, str], workflow_id: str) -> dict[str, Any] | None:
    found: dict[str, Any] = (await api.client.get(f"/api/v1/workflows/{workflow_id}", headers=headers)).json()
    return found if found["status"] != "running" else None


async def runs_and_releases(db: AsyncEngine, workflow_id: str) -> dict[str, tuple[int, int, int]]:
    """Per ref: the job's runs, its `running` audit rows and its `pending` ones (its releases)."""
    async with db.connect() as conn:
        jobs = {row.id: row for row in await conn.execute(select(JOBS).where(JOBS.c.workflow_id == workflow_id))}
        trail = await conn.execute(select(JOB_EVENTS.c.job_id, JOB_EVENTS.c.event).where(JOB_EVENTS.c.job_id.in_(jobs)))
        events = [(row.job_id, row.event) for row in trail]
    return {
        job.ref: (job.runs, events.count((job_id, "running")), events.count((job_id, "pending")))
        for job_id, job in jobs.items()
    }


def fan_in(width: int) -> list[dict[str, Any]]:
    parents = [{"ref": f"p{n}", "job_type": "echo", "payload": {"n": n}} for n in range(width)]
    return [*parents, {"ref": "last", "job_type": "echo", "payload": {}, "depends_on": [p["ref"] for p in parents]}]


async def test_sigkill_after_a_finish_commit_releases_each_dependent_once(
    api: Api, db: AsyncEngine, tmp_path: Path
) -> None:
    headers = await api.new_client("wf-crash")
    chain = [
        {"ref": "a", "job_type": "echo", "payload": {}},
        {"ref": "b", "job_type": "echo", "payload": {}, "depends_on": ["a"]},
        {"ref": "c", "job_type": "echo", "payload": {}, "depends_on": ["b"]},
    ]
    workflows = [await submit(api, headers, fan_in(6)), await submit(api, headers, chain)]
    with app_process(["worker", "jobs"], one_lane(failpoints="after_finish_commit"), tmp_path / "a.log") as first:
        assert first.popen.wait(30) == -9, first.output()  # killed itself right after its first finish commit
    with app_process(["worker", "jobs"], one_lane(lock_ttl_seconds=2), tmp_path / "b.log") as second:
        for workflow in workflows:
            done = await wait_for(lambda w=workflow: ended(api, headers, w["id"]), within=60)
            assert done["status"] == "succeeded", second.output()
    for workflow in workflows:
        done = await ended(api, headers, workflow["id"])
        assert done is not None
        jobs = {entry["ref"]: entry["job"] for entry in done["jobs"]}
        counted = await runs_and_releases(db, workflow["id"])
        for entry in done["jobs"]:
            runs, running, releases = counted[entry["ref"]]
            assert runs == running  # every run recorded; a run lost with the first worker is run again
            assert releases == (1 if entry["depends_on"] else 0)  # released once, whatever the crash
            for dep in entry["depends_on"]:
                finished, started = jobs[dep]["finished_at"], jobs[entry["ref"]]["started_at"]
                assert datetime.fromisoformat(finished) <= datetime.fromisoformat(started)  # never before them
        last = "last" if "last" in jobs else "c"
        assert counted[last][:2] == (1, 1)  # the dependent ran exactly once


async def test_two_worker_processes_finishing_a_fan_in_release_its_last_job_once(
    api: Api, db: AsyncEngine, tmp_path: Path
) -> None:
    headers = await api.new_client("wf-two")
    workflow = await submit(api, headers, fan_in(200))
    env = settings_env(make_settings(job_consumers_default=4))
    with (
        app_process(["worker", "jobs"], env, tmp_path / "a.log") as first,
        app_process(["worker", "jobs"], env, tmp_path / "b.log") as second,
    ):
        done = await wait_for(lambda: ended(api, headers, workflow["id"]), within=120)
        assert done["status"] == "succeeded", first.output() + second.output()
    counted = await runs_and_releases(db, workflow["id"])
    assert counted["last"] == (1, 1, 1)
    assert {counted[f"p{n}"] for n in range(200)} == {(1, 1, 0)}
