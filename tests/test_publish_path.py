"""The crash-proof publish path: broker down means 202 + pending, and the relay publishes it later."""

from pathlib import Path

import pytest

from app.core.names import Lane
from app.core.resources import Resources
from app.schemas.job import JOB_REQUEST
from app.services.jobs import JobService
from app.services.relay import make_outbox
from app.services.tenancy import Principal
from tests.conftest import make_settings, settings_env
from tests.support import Api, BrokerProbe, app_process, free_port, rabbitmq_stopped, wait_for


@pytest.mark.broker_restart
async def test_broker_down_gives_202_pending_then_the_relay_publishes_once(api: Api, broker: BrokerProbe) -> None:
    lane = broker.topology.names.lane_queue(Lane.DEFAULT)
    headers = await api.new_client("outage")
    with rabbitmq_stopped():
        answer = await api.submit(headers, payload={"during": "outage"})
        assert answer.status_code == 202, answer.text
        job = answer.json()
        assert job["status"] == "pending"
        assert (await api.job(headers, job["id"]))["status"] == "pending"
    # The probe's connection died with the broker; look through a new one.
    await broker.close()
    probe = await BrokerProbe.connect("amqp://guest:guest@127.0.0.1:5672/", broker.topology)
    try:

        async def queued() -> bool:
            return (await api.job(headers, job["id"]))["status"] == "queued"

        await wait_for(queued, within=30)
        messages = await probe.take_all(lane)
        assert [m.message_id for m in messages].count(job["id"]) == 1
        events = (await api.client.get(f"/api/v1/jobs/{job['id']}/events", headers=headers)).json()
        assert [e["event"] for e in events] == ["created", "queued"]
    finally:
        await probe.close()


async def test_a_crash_between_commit_and_publish_is_healed_by_the_relay(broker: BrokerProbe, tmp_path: Path) -> None:
    """Commit the job and its outbox row but never publish (what a killed API leaves), then let a new API relay it."""
    settings = make_settings()
    lane = broker.topology.names.lane_queue(Lane.BULK)
    await broker.purge(lane)
    resources = await Resources.open(settings, role="doomed")
    try:
        service = JobService(resources.engine, make_outbox(resources), resources.names)
        request = JOB_REQUEST.validate_python({"job_type": "echo", "payload": {"lost": True}, "priority": 9})
        job, _ = await service._save(Principal(None, "crash", False), request, "req-crash", "digest")
    finally:
        await resources.close()
    port = free_port()
    env = settings_env(make_settings(port=port, outbox_relay_after=0.5, publish_timeout_seconds=0.2))
    with app_process(["api"], env, tmp_path / "api.log") as process:

        async def bulk_has_it() -> int:
            return await broker.depth(lane)

        assert await wait_for(bulk_has_it, within=30) == 1, process.output()
        messages = await broker.take_all(lane)
        assert [m.message_id for m in messages] == [job["id"]]
        assert messages[0].headers["x-request-id"] == "req-crash"
