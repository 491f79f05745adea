"""Webhooks as an SSRF vector at delivery time, secrets in logs, and a webhook worker killed mid-delivery."""

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import make_settings, settings_env
from tests.receiver import Receiver
from tests.support import Api, BrokerProbe, app_process, until_status, wait_for


async def test_private_addresses_are_refused_again_at_delivery(
    api: Api, worker: JobWorker, receiver: Receiver, broker: BrokerProbe, tmp_path: Path
) -> None:
    """Registered while allowed (say, DNS changed since): a worker that does not allow it sends nothing."""
    headers = await api.new_client("ssrf-deliver")
    created = await api.client.post(
        "/api/v1/webhooks", json={"url": receiver.url("/private"), "events": ["job.succeeded"]}, headers=headers
    )
    assert created.status_code == 201
    env = settings_env(make_settings(webhook_allow_private_networks=False))
    with app_process(["worker", "webhooks"], env, tmp_path / "hooks.log") as process:
        job = (await api.submit(headers)).json()

        async def failed_for_good() -> list[dict[str, Any]] | None:
            logs = (await api.client.get(f"/api/v1/jobs/{job['id']}/logs", headers=headers)).json()
            return logs if logs and logs[0]["status"] == "failed" else None

        logs = await wait_for(failed_for_good, within=30)
        assert logs is not None, process.output()
    attempts = logs[0]["attempts"]
    assert len(attempts) == 3 and all(a["status_code"] is None for a in attempts)
    assert all("loopback" in a["error"] for a in attempts)
    assert receiver.on("/private") == []


async def test_secrets_never_reach_the_logs(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG", serialize=True)
    caplog.set_level(logging.DEBUG)
    headers = await api.new_client("secret-logs")
    created = (await api.client.post("/api/v1/webhooks", json={"url": receiver.url("/quiet")}, headers=headers)).json()
    rotated = (await api.client.post(f"/api/v1/webhooks/{created['id']}/rotate-secret", headers=headers)).json()
    job = (await api.submit(headers, job_type="flaky", payload={"fail_times": 1}, max_retries=1)).json()
    await until_status(api, headers, job["id"])
    await wait_for(lambda: _count(receiver, "/quiet", 2))
    logger.remove(sink)
    everything = "\n".join(lines) + caplog.text
    assert job["id"] in everything  # the logs did see this test's work
    for secret in (created["secret"], rotated["secret"]):
        assert secret not in everything
        assert secret.removeprefix("whsec_") not in everything


@pytest.mark.slow
async def test_a_webhook_worker_killed_mid_delivery_delivers_afterwards(
    api: Api, worker: JobWorker, receiver: Receiver, tmp_path: Path
) -> None:
    headers = await api.new_client("hooks-kill")
    created = await api.client.post(
        "/api/v1/webhooks", json={"url": receiver.url("/slow"), "events": ["job.succeeded"]}, headers=headers
    )
    assert created.status_code == 201
    receiver.delay = 3
    env = settings_env(make_settings(webhook_timeout_seconds=5))
    with app_process(["worker", "webhooks"], env, tmp_path / "a.log") as first:
        job = (await api.submit(headers)).json()
        await wait_for(lambda: _count(receiver, "/slow", 1), within=20)
        first.kill()  # mid-request: the receiver is still sleeping on it
    receiver.delay = 0
    with app_process(["worker", "webhooks"], env, tmp_path / "b.log") as second:

        async def succeeded() -> list[dict[str, Any]] | None:
            logs = (await api.client.get(f"/api/v1/jobs/{job['id']}/logs", headers=headers)).json()
            return logs if logs and logs[0]["status"] == "succeeded" else None

        logs = await wait_for(succeeded, within=40)
        assert logs is not None, second.output()
    got = receiver.on("/slow")
    assert len(got) >= 2 and {r.headers["webhook-id"] for r in got} == {logs[0]["id"]}
    assert json.loads(got[-1].body)["data"]["job"]["id"] == job["id"]


async def _count(receiver: Receiver, path: str, at_least: int) -> bool:
    return len(receiver.on(path)) >= at_least
