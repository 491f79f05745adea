"""A paused job type across worker processes: the pause is in the database, so a worker killed with SIGKILL and
another started in its place both hold the type's jobs; nothing is lost, and the resume runs every one of them
once."""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.core.names import Lane
from tests.conftest import make_settings, settings_env
from tests.support import Api, BrokerProbe, app_process, trail, until_status, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
async def resumed(api: Api) -> AsyncIterator[None]:
    yield
    answer = await api.client.post("/api/v1/job-types/echo/resume", headers=api.admin)
    assert answer.status_code == 202, answer.text


async def until_held(api: Api, headers: dict[str, str], job_id: str) -> None:
    async def held() -> bool:
        return any(entry["event"] == "held" for entry in await trail(api, headers, job_id))

    await wait_for(held, within=20)


async def consumers_up(broker: BrokerProbe) -> bool:
    return await broker.consumers(broker.topology.names.lane_queue(Lane.DEFAULT)) >= 1


async def no_consumer(broker: BrokerProbe) -> bool:
    return await broker.consumers(broker.topology.names.lane_queue(Lane.DEFAULT)) == 0


async def test_a_pause_holds_across_a_worker_killed_and_another_started(
    api: Api, broker: BrokerProbe, tmp_path: Path, resumed: None
) -> None:
    headers = await api.new_client("pause-restart")
    env = settings_env(make_settings())
    assert (await api.client.post("/api/v1/job-types/echo/pause", headers=api.admin)).status_code == 202
    with app_process(["worker", "jobs"], env, tmp_path / "a.log") as first:
        await wait_for(lambda: consumers_up(broker), within=20)  # it read the pauses before consuming
        before = (await api.submit(headers, payload={"n": 1})).json()
        await until_held(api, headers, before["id"])
        first.kill()
    await wait_for(lambda: no_consumer(broker), within=20)
    during = (await api.submit(headers, payload={"n": 2})).json()  # waits in its lane: no worker is up

    with app_process(["worker", "jobs"], env, tmp_path / "b.log") as second:
        await until_held(api, headers, during["id"])
        for job in (before, during):
            assert (await api.job(headers, job["id"]))["status"] == "queued", second.output()
        assert (await api.client.post("/api/v1/job-types/echo/resume", headers=api.admin)).status_code == 202
        done = [await until_status(api, headers, job["id"], 20) for job in (before, during)]

    assert [(job["status"], job["result"], job["attempts"]) for job in done] == [
        ("succeeded", {"n": 1}, 1),
        ("succeeded", {"n": 2}, 1),
    ]
    for job in (before, during):
        events = [entry["event"] for entry in await trail(api, headers, job["id"])]
        assert events.count("held") == 1 and events.count("running") == 1 and events.count("succeeded") == 1
