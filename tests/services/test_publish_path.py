"""The crash-proof publish path: broker down means 202 + pending, and the relay publishes it later."""

import signal
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Lane
from app.core.topology import build_topology
from app.main import create_app
from app.models.tables import JOBS
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.local.private_services import PrivateRabbit
from tests.support import (
    BrokerProbe,
    api_with,
    app_process,
    broker_probe,
    free_port,
    rabbitmq_stopped,
    until_serving,
    wait_for,
)


@pytest.mark.slow
async def test_broker_down_gives_202_pending_then_the_relay_publishes_once(private_rabbit: PrivateRabbit) -> None:
    settings = make_settings(rabbitmq_url=private_rabbit.url)
    async with api_with(create_app(settings), ADMIN_KEY) as api:
        topology = build_topology(settings)
        lane = topology.names.lane_queue(Lane.DEFAULT)
        headers = await api.new_client("outage")
        with rabbitmq_stopped(private_rabbit):
            answer = await api.submit(headers, payload={"during": "outage"})
            assert answer.status_code == 202, answer.text
            job = answer.json()
            assert job["status"] == "pending"
            assert (await api.job(headers, job["id"]))["status"] == "pending"
        async with broker_probe(private_rabbit.url, topology) as probe:

            async def queued() -> bool:
                return (await api.job(headers, job["id"]))["status"] == "queued"

            await wait_for(queued, within=30)
            messages = await probe.take_all(lane)
            assert [m.message_id for m in messages].count(job["id"]) == 1
            events = (await api.client.get(f"/api/v1/jobs/{job['id']}/events", headers=headers)).json()
            assert [e["event"] for e in events] == ["created", "queued"]


async def test_a_crash_between_commit_and_publish_is_healed_by_the_relay(
    broker: BrokerProbe, db: AsyncEngine, tmp_path: Path
) -> None:
    """An API killed right after it committed a job and its outbox row, before publishing: a new API relays it."""
    lane = broker.topology.names.lane_queue(Lane.BULK)
    await broker.purge(lane)
    port = free_port()
    doomed = settings_env(make_settings(port=port, failpoints="after_submit_commit"))
    with app_process(["api"], doomed, tmp_path / "doomed.log") as process:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            await until_serving(client)
            created = await client.post("/api/v1/api-keys", json={"client_id": "crash"}, headers=admin())
            key = {"Authorization": f"Bearer {created.json()['api_key']}", "X-Request-ID": "req-crash"}
            with pytest.raises(httpx.TransportError):  # it died before it could answer
                await client.post("/api/v1/jobs", json={"job_type": "echo", "payload": {}, "priority": 9}, headers=key)
        assert process.popen.wait(10) == -signal.SIGKILL
    async with db.connect() as conn:
        [job] = (await conn.execute(select(JOBS.c.id, JOBS.c.status).where(JOBS.c.client_id == "crash"))).all()
    assert job.status == "pending" and await broker.depth(lane) == 0  # committed, never published
    env = settings_env(make_settings(port=free_port(), outbox_relay_after=0.5, publish_timeout_seconds=0.2))
    with app_process(["api"], env, tmp_path / "api.log") as process:

        async def bulk_has_it() -> int:
            return await broker.depth(lane)

        assert await wait_for(bulk_has_it, within=30) == 1, process.output()
        messages = await broker.take_all(lane)
        assert [m.message_id for m in messages] == [job.id]
        assert messages[0].headers["x-request-id"] == "req-crash"


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_KEY}"}
