"""A running job's progress as clients see it: on the job (GET), on its stream and on the events stream as
`job.progress` events at most one a second, kept after the job ends; delivered to the webhook endpoints that
name `job.progress`, and to no other."""

import json
from typing import Any

import httpx
from standardwebhooks.webhooks import Webhook

from app.core.messages import event_id
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.api.test_workflow_events import settings, worker
from tests.receiver import Receiver
from tests.services.test_live import Message, served, stream
from tests.support import Api, until_status, wait_for
from tests.workers.test_webhooks import register

__all__ = ["served", "settings", "worker"]  # the fixtures (a short keep-alive, a worker with its loops), by name

SLEEP = {"job_type": "sleep", "payload": {"seconds": 2.2, "progress": True}}


async def submitted(api: Api, headers: dict[str, str]) -> str:
    answer = await api.submit(headers, **SLEEP)
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["id"]
    return job_id


def progress_of(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.data["data"]["job"]["progress"] for m in messages if m.event == "job.progress"]


async def test_progress_shows_on_the_job_while_it_runs_and_its_last_value_stays(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("progress-get")
    job_id = await submitted(api, headers)

    async def reported() -> dict[str, Any] | None:
        job: dict[str, Any] = (await api.client.get(f"/api/v1/jobs/{job_id}", headers=headers)).json()
        return job if job["progress"] is not None else None

    job = await wait_for(reported, within=20)
    assert job["status"] == "running" and 0 < job["progress"]["fraction"] < 1
    assert job["progress"]["message"] is None and job["progress"]["updated_at"]
    done = await until_status(api, headers, job_id, 20)
    assert done["status"] == "succeeded"
    assert done["progress"]["fraction"] == 1.0  # sleep's last report, recorded with its result


async def test_progress_is_on_the_jobs_stream_and_the_events_stream_at_most_once_a_second(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    headers = await api.new_client("progress-live")
    async with stream(served, "/api/v1/events/stream", headers, types="job.progress") as events:
        job_id = await submitted(api, headers)
        async with stream(served, f"/api/v1/jobs/{job_id}/stream", headers) as live:
            messages = await live.rest()
        first = await events.next()
    kinds = [m.event for m in messages]
    assert kinds[-1] == "job.succeeded" and kinds.count("job.running") == 1
    reports = progress_of(messages)
    assert 2 <= len(reports) <= 3  # 2.2 s of reports every 0.5 s: one write a second at most
    assert kinds.index("job.running") < kinds.index("job.progress")
    assert [r["fraction"] for r in reports] == sorted(r["fraction"] for r in reports)
    progress = next(m for m in messages if m.event == "job.progress")
    assert progress.id is not None and progress.id.startswith(event_id(job_id, 2) + "_p")
    assert progress.data["seq"] == 2 and progress.data["data"]["job"]["status"] == "running"
    assert first is not None and first.event == "job.progress"
    assert first.data["data"]["job"]["id"] == job_id and first.id == progress.id


async def test_progress_is_delivered_only_to_the_endpoints_that_name_it(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("progress-hooks")
    listed = await register(api, headers, receiver, "/progress", events=["job.progress"])
    await register(api, headers, receiver, "/default")  # the default events: no progress
    job_id = await submitted(api, headers)
    await until_status(api, headers, job_id, 20)

    async def delivered() -> list[Any] | None:
        return receiver.on("/progress") or None

    request = (await wait_for(delivered, within=20))[0]
    payload: dict[str, Any] = Webhook(listed["secret"]).verify(request.body, request.headers)
    assert payload["type"] == "job.progress" and payload["data"]["job"]["id"] == job_id
    assert 0 < payload["data"]["job"]["progress"]["fraction"] <= 1
    await wait_for(lambda: _arrived(receiver, "/default"), within=20)
    assert {json.loads(r.body)["type"] for r in receiver.on("/default")} == {"job.succeeded"}


async def _arrived(receiver: Receiver, path: str) -> bool:
    return bool(receiver.on(path))
