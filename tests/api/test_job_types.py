"""Pausing a job type through the API (docs/flow-control.md), with a job worker in this process: a paused type's
jobs wait `queued`, held in the database with a `held` audit row, and run once it is resumed; a job already in its
lane when the pause comes is held too; a job cancelled while held never runs; the counts are the caller's (an
admin's: everyone's); pause and resume are admin calls; an unknown type is a 404."""

from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.models.tables import JOBS
from app.schemas.payloads.registry import PAYLOADS
from app.services.upkeep.gauges import Gauges
from app.workers.jobs.worker import JobWorker
from tests.conftest import start_worker
from tests.support import Api, trail, until_status, wait_for


@pytest.fixture
async def resumed(api: Api) -> AsyncIterator[None]:
    """Every job type resumed afterwards, whatever the test did: a pause outlives everything by design."""
    yield
    for name in PAYLOADS:
        answer = await api.client.post(f"/api/v1/job-types/{name}/resume", headers=api.admin)
        assert answer.status_code == 202, answer.text


async def steer(api: Api, job_type: str, verb: str, headers: dict[str, str] | None = None) -> Any:
    answer = await api.client.post(f"/api/v1/job-types/{job_type}/{verb}", headers=headers or api.admin)
    return answer


async def listed(api: Api, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    answer = await api.client.get("/api/v1/job-types", headers=headers)
    assert answer.status_code == 200, answer.text
    return {item["name"]: item for item in answer.json()["items"]}


async def seen_paused(worker: JobWorker, job_type: str, paused: bool = True) -> None:
    """Wait until the worker's view of the paused types has caught up with the database."""

    async def caught_up() -> bool:
        return (job_type in worker.holds.paused.types) == paused

    await wait_for(caught_up, within=10)


async def until_held(api: Api, headers: dict[str, str], job_id: str) -> list[dict[str, Any]]:
    """Wait for the job's `held` audit row: the positive sign that a worker held it rather than ran it."""

    async def held() -> list[dict[str, Any]]:
        events = await trail(api, headers, job_id)
        return events if any(e["event"] == "held" for e in events) else []

    return await wait_for(held, within=15)


def events_of(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["event"] for entry in entries]


async def test_every_job_type_is_listed_with_its_description_and_the_callers_counts(api: Api) -> None:
    headers = await api.new_client("types-list")
    items = (await api.client.get("/api/v1/job-types", headers=headers)).json()["items"]
    assert [item["name"] for item in items] == sorted(PAYLOADS)
    for item in items:
        assert item == {
            "name": item["name"],
            "description": PAYLOADS[item["name"]].description,
            "paused": False,
            "queued": 0,  # a new client has no job
            "running": 0,
            "payload_schema": PAYLOADS[item["name"]].model.model_json_schema(),
        }


async def test_pause_and_resume_are_admin_calls_and_an_unknown_type_is_a_404(api: Api, resumed: None) -> None:
    headers = await api.new_client("types-steer")
    for verb in ("pause", "resume"):
        refused = await steer(api, "echo", verb, headers)
        assert refused.status_code == 403, refused.text
        assert refused.json() == {"detail": "This call needs an admin API key.", "code": "forbidden"}
        unknown = await steer(api, "no-such-type", verb)
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["code"] == "not_found" and "job type" in unknown.json()["detail"]
    assert (await listed(api, headers))["echo"]["paused"] is False

    for _ in range(2):  # pausing a paused type changes nothing
        paused = await steer(api, "echo", "pause")
        assert paused.status_code == 202, paused.text
        assert (paused.json()["name"], paused.json()["paused"]) == ("echo", True)
    assert [name for name, item in (await listed(api, headers)).items() if item["paused"]] == ["echo"]
    again = await steer(api, "echo", "resume")
    assert again.status_code == 202 and again.json()["paused"] is False
    assert not any(item["paused"] for item in (await listed(api, headers)).values())


async def test_a_paused_types_new_job_waits_queued_and_runs_once_resumed(
    api: Api, worker: JobWorker, db: AsyncEngine, resumed: None
) -> None:
    headers = await api.new_client("types-pause")
    assert (await steer(api, "echo", "pause")).status_code == 202
    await seen_paused(worker, "echo")
    job = (await api.submit(headers, payload={"held": "back"})).json()

    entries = await until_held(api, headers, job["id"])

    held = next(entry for entry in entries if entry["event"] == "held")
    assert held["detail"] == {"reason": "paused"}
    other = (await api.submit(headers, job_type="sleep", payload={"seconds": 0})).json()
    assert (await until_status(api, headers, other["id"]))["status"] == "succeeded"  # other types run meanwhile
    waiting = await api.job(headers, job["id"])
    assert waiting["status"] == "queued" and "held" not in waiting
    assert "running" not in events_of(await trail(api, headers, job["id"]))
    assert (await listed(api, headers))["echo"] | {"description": "", "payload_schema": {}} == {
        "name": "echo",
        "description": "",
        "payload_schema": {},
        "paused": True,
        "queued": 1,
        "running": 0,
    }
    await Gauges(worker.resources).held()
    async with db.connect() as conn:
        held_now = (await conn.execute(select(func.count()).where(JOBS.c.held == "paused"))).scalar_one()
    assert held_now >= 1 and REGISTRY.get_sample_value("held_jobs", {"reason": "paused"}) == held_now

    assert (await steer(api, "echo", "resume")).status_code == 202
    done = await until_status(api, headers, job["id"])

    assert (done["status"], done["result"], done["attempts"]) == ("succeeded", {"held": "back"}, 1)
    events = events_of(await trail(api, headers, job["id"]))
    assert events.count("running") == 1 and events.index("held") < events.index("running")
    assert (await listed(api, headers))["echo"]["queued"] == 0


async def test_a_job_in_its_lane_when_the_pause_comes_is_held_not_run(
    api: Api, settings: Settings, resumed: None
) -> None:
    headers = await api.new_client("types-lane")
    job = (await api.submit(headers)).json()
    assert job["status"] == "queued"  # in its lane, no worker running yet
    assert (await steer(api, "echo", "pause")).status_code == 202

    async with start_worker(JobWorker, settings):
        await until_held(api, headers, job["id"])
        assert (await api.job(headers, job["id"]))["status"] == "queued"
        assert (await steer(api, "echo", "resume")).status_code == 202
        done = await until_status(api, headers, job["id"])

    assert done["status"] == "succeeded"
    assert events_of(await trail(api, headers, job["id"])).count("running") == 1


async def test_a_job_cancelled_while_held_never_runs(
    api: Api, worker: JobWorker, db: AsyncEngine, resumed: None
) -> None:
    headers = await api.new_client("types-cancel")
    assert (await steer(api, "echo", "pause")).status_code == 202
    await seen_paused(worker, "echo")
    job = (await api.submit(headers)).json()
    await until_held(api, headers, job["id"])

    cancelled = await api.client.post(f"/api/v1/jobs/{job['id']}/cancel", headers=headers)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    async with db.connect() as conn:
        assert (await conn.execute(select(JOBS.c.held).where(JOBS.c.id == job["id"]))).scalar_one() is None
    assert (await steer(api, "echo", "resume")).status_code == 202  # its release pass has run when it answers
    await seen_paused(worker, "echo", paused=False)
    later = (await api.submit(headers)).json()
    assert (await until_status(api, headers, later["id"]))["status"] == "succeeded"

    assert (await api.job(headers, job["id"]))["status"] == "cancelled"
    assert "running" not in events_of(await trail(api, headers, job["id"]))


async def test_the_counts_are_the_callers_and_an_admins_are_everyones(api: Api, worker: JobWorker) -> None:
    mine, theirs = await api.new_client("types-mine"), await api.new_client("types-theirs")
    job = (await api.submit(mine, job_type="sleep", payload={"seconds": 3})).json()
    await until_status(api, mine, job["id"], 15, "running")

    assert (await listed(api, mine))["sleep"]["running"] == 1
    assert (await listed(api, theirs))["sleep"]["running"] == 0
    assert (await listed(api, api.admin))["sleep"]["running"] >= 1
    assert (await until_status(api, mine, job["id"]))["status"] == "succeeded"
    assert (await listed(api, mine))["sleep"]["running"] == 0
