"""A workflow's end as an event: delivered signed (verified with the Standard Webhooks library) to the endpoints
that list it, and to no endpoint that does not; on the events stream, to its client and nobody else."""

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from app.core.config import Settings
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.api.test_workflows import submit, until_ended
from tests.conftest import make_settings, start_worker
from tests.receiver import Receiver
from tests.services.test_live import served, stream
from tests.support import Api, wait_for
from tests.workers.test_webhooks import register

__all__ = ["served"]  # the fixture, used by name


@pytest.fixture
def settings() -> Settings:
    return make_settings(live_ping_seconds=0.5)


@pytest.fixture
async def worker(settings: Settings) -> AsyncIterator[JobWorker]:
    async with start_worker(JobWorker, settings, background=True) as running:
        yield running


CHAIN = [
    {"ref": "a", "job_type": "echo", "payload": {"n": 1}},
    {"ref": "b", "job_type": "echo", "payload": {"n": 2}, "depends_on": ["a"]},
]


async def test_a_workflows_end_is_delivered_signed_to_the_endpoints_that_list_it(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("wf-hooks")
    listed = await register(api, headers, receiver, "/workflows", events=["workflow.succeeded", "workflow.failed"])
    await register(api, headers, receiver, "/jobs")  # the default events: a job's, not a workflow's
    workflow = await submit(api, headers, CHAIN, name="hooked")
    await until_ended(api, headers, workflow["id"])

    async def arrived() -> list[Any] | None:
        got = receiver.on("/workflows")
        return got or None

    [request] = await wait_for(arrived, within=20)
    payload: dict[str, Any] = Webhook(listed["secret"]).verify(request.body, request.headers)
    assert payload["type"] == "workflow.succeeded" and payload["id"].startswith("evt_wf_")
    shown = payload["data"]["workflow"]
    assert (shown["id"], shown["name"], shown["status"], shown["counts"]) == (
        workflow["id"],
        "hooked",
        "succeeded",
        {"succeeded": 2},
    )
    await wait_for(lambda: _two_job_events(receiver), within=20)
    assert {json.loads(r.body)["type"] for r in receiver.on("/jobs")} == {"job.succeeded"}


async def test_a_workflows_end_is_on_its_clients_events_stream(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    mine, theirs = await api.new_client("wf-live"), await api.new_client("wf-live-other")
    async with (
        stream(served, "/api/v1/events/stream", mine, types="workflow.succeeded") as live,
        stream(served, "/api/v1/events/stream", theirs, types="workflow.succeeded") as other,
    ):
        workflow = await submit(api, mine, CHAIN)
        message = await live.next()
        assert message is not None and message.event == "workflow.succeeded"
        assert message.data["data"]["workflow"]["id"] == workflow["id"]
        theirs_workflow = await submit(api, theirs, CHAIN)
        seen = await other.next()
        assert seen is not None and seen.data["data"]["workflow"]["id"] == theirs_workflow["id"]  # not mine first


async def _two_job_events(receiver: Receiver) -> bool:
    return len(receiver.on("/jobs")) >= 2
