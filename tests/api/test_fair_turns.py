"""Fair turns between clients in a lane (docs/flow-control.md) through the API, with a job worker of 8 consumers in
this process: a client's backlog beyond its share of the lane waits its turn in the database (`queued`, with a
`held` audit row), and is released as its share drains; another client's new job starts before 10 % of that
backlog has run; every job runs once; a job cancelled while it waits its turn never runs; a batch with a scheduled
job in a lane of its own is saved whole; fair turns off, a client's jobs all go to the lane."""

from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from sqlalchemy import select

from app.core.config import Settings
from app.core.database import make_engine
from app.core.messages import JobMessage
from app.core.names import Lane
from app.main import create_app
from app.models.tables import JOBS
from app.workers.jobs.worker import JobWorker
from tests.conftest import ADMIN_KEY, start_worker
from tests.support import Api, BrokerProbe, api_with, trail, until_status, wait_for

BACKLOG = 400
FLOOR = 8  # FAIR_SHARE here: the share is the larger of it and twice the lane's consumers


@pytest.fixture
def fair(settings: Settings) -> Settings:
    return settings.model_copy(update={"fair_share": FLOOR, "job_consumers_default": 8})


@pytest.fixture
async def fair_api(fair: Settings) -> AsyncIterator[Api]:
    async with api_with(create_app(fair), ADMIN_KEY) as running:
        yield running


async def submit_backlog(api: Api, headers: dict[str, str], count: int) -> list[str]:
    ids = []
    for start in range(0, count, 100):
        items = [{"job_type": "sleep", "payload": {"seconds": 0.02}} for _ in range(start, min(count, start + 100))]
        answer = await api.client.post("/api/v1/jobs/batch", json={"jobs": items}, headers=headers)
        assert answer.status_code == 201, answer.text
        assert {item["job"]["status"] for item in answer.json()["items"]} == {"queued"}
        ids += [item["job"]["id"] for item in answer.json()["items"]]
    return ids


async def rows_of(settings: Settings, client_id: str) -> list[dict[str, object]]:
    engine = make_engine(settings.database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = select(JOBS.c.id, JOBS.c.status, JOBS.c.held, JOBS.c.started_at, JOBS.c.runs)
            return [dict(row._mapping) for row in await conn.execute(query.where(JOBS.c.client_id == client_id))]
    finally:
        await engine.dispose()


async def test_a_backlog_waits_its_turn_and_another_clients_new_job_starts_first(fair_api: Api, fair: Settings) -> None:
    api = fair_api
    a, b = await api.new_client("fair-a"), await api.new_client("fair-b")
    backlog = await submit_backlog(api, a, BACKLOG)

    # No consumer yet: the share is the floor; the rest wait their turn in the database, queued.
    rows = await rows_of(fair, "fair-a")
    assert [(r["status"], r["held"]) for r in rows].count(("queued", None)) == FLOOR
    assert sum(1 for r in rows if r["held"] == "fair") == BACKLOG - FLOOR
    held = [e for e in await trail(api, a, backlog[-1]) if e["event"] == "held"]
    assert [e["detail"] for e in held] == [{"reason": "fair"}]

    async with start_worker(JobWorker, fair, background=True):
        await wait_for(lambda: _started_some(fair), within=30)
        submitted = datetime.now().astimezone()
        newcomer = (await api.submit(b, job_type="sleep", payload={"seconds": 0.02})).json()
        ran = await until_status(api, b, newcomer["id"], 30)
        assert ran["status"] == "succeeded"
        for job_id in backlog:
            assert (await until_status(api, a, job_id, 120))["status"] == "succeeded"

    rows = await rows_of(fair, "fair-a")
    assert all(r["runs"] == 1 and r["held"] is None for r in rows)
    started = datetime.fromisoformat(ran["started_at"].replace("Z", "+00:00"))
    starts = [r["started_at"] for r in rows]
    during = sum(1 for at in starts if submitted <= _aware(at) < started)
    # While the newcomer waited, A's jobs ahead of it were its share in the lane and those in the consumers' hands.
    assert during < BACKLOG // 10, (during, sum(1 for at in starts if _aware(at) < submitted))


def _aware(value: object) -> datetime:
    assert isinstance(value, datetime)
    return value if value.tzinfo else value.astimezone()


async def _started_some(settings: Settings) -> bool:
    return sum(1 for r in await rows_of(settings, "fair-a") if r["started_at"] is not None) >= 2 * FLOOR


async def test_with_fair_turns_off_a_clients_jobs_all_go_to_the_lane(settings: Settings, broker: BrokerProbe) -> None:
    off = settings.model_copy(update={"fair_share": 0})
    lane = broker.topology.names.lane_queue(Lane.DEFAULT)
    await broker.purge(lane)
    async with api_with(create_app(off), ADMIN_KEY) as api:
        headers = await api.new_client("fair-off")
        await submit_backlog(api, headers, 100)
    rows = await rows_of(off, "fair-off")
    assert [r["held"] for r in rows] == [None] * 100
    ours = [m for m in await broker.take_all(lane) if JobMessage.from_bytes(m.body).client_id == "fair-off"]
    assert len(ours) == 100


async def test_a_batch_with_a_scheduled_job_in_another_lane_is_saved_whole(fair_api: Api) -> None:
    headers = await fair_api.new_client("fair-mixed")
    items = [
        {"job_type": "echo", "payload": {}},
        {"job_type": "echo", "payload": {}, "priority": 1, "delay_seconds": 60},
    ]
    answer = await fair_api.client.post("/api/v1/jobs/batch", json={"jobs": items}, headers=headers)
    assert answer.status_code == 201, answer.text
    assert [item["job"]["status"] for item in answer.json()["items"]] == ["queued", "scheduled"]


async def test_a_job_cancelled_while_it_waits_its_turn_never_runs_and_the_rest_do(
    fair_api: Api, fair: Settings
) -> None:
    headers = await fair_api.new_client("fair-cancel")
    backlog = await submit_backlog(fair_api, headers, 40)
    waiting = backlog[-1]
    assert [e["detail"] for e in await trail(fair_api, headers, waiting) if e["event"] == "held"] == [
        {"reason": "fair"}
    ]

    cancelled = await fair_api.client.post(f"/api/v1/jobs/{waiting}/cancel", headers=headers)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
    async with start_worker(JobWorker, fair, background=True):
        for job_id in backlog[:-1]:
            assert (await until_status(fair_api, headers, job_id, 60))["status"] == "succeeded"
    assert "running" not in [e["event"] for e in await trail(fair_api, headers, waiting)]
    assert (await fair_api.job(headers, waiting))["status"] == "cancelled"
