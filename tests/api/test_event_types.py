"""The event catalogue (GET /api/v1/event-types): every type a receiver can get, and examples shaped as the real
bodies are, checked against a delivery a loopback receiver got."""

import json
from typing import Any

from app.core.names import JOB_EVENTS, SUBSCRIBABLE_EVENTS, TEST_EVENT
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.receiver import Receiver
from tests.support import Api, wait_for


def shape(value: Any) -> Any:
    """The keys of a JSON value, all the way down (an object's values by key; a list's first item)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    return [shape(value[0])] if isinstance(value, list) and value else None


async def catalogue(api: Api, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
    answer = await api.client.get("/api/v1/event-types", headers=headers)
    assert answer.status_code == 200, answer.text
    return {kind["type"]: kind for kind in answer.json()}


async def test_every_event_a_receiver_can_get_is_listed_with_an_example_of_its_own_type(api: Api) -> None:
    kinds = await catalogue(api, await api.new_client("catalogue"))
    assert list(kinds) == [*SUBSCRIBABLE_EVENTS, TEST_EVENT]
    for name, kind in kinds.items():
        assert kind["example"]["type"] == name and kind["description"]
        assert kind["subscribable"] is (name != TEST_EVENT) and kind["default"] is (name in JOB_EVENTS)
        assert set(kind["example"]) == {"id", "type", "created_at", "seq", "data"}
    assert kinds["job.progress"]["example"]["data"]["job"]["progress"]["fraction"] == 0.4
    assert kinds["workflow.failed"]["example"]["data"]["workflow"]["status"] == "failed"
    assert (await api.client.get("/api/v1/event-types")).status_code == 401


async def test_the_job_succeeded_example_has_the_keys_of_a_real_delivery(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("catalogue-real")
    hook = {"url": receiver.url("/real"), "events": ["job.succeeded"]}
    assert (await api.client.post("/api/v1/webhooks", json=hook, headers=headers)).status_code == 201
    submitted = await api.submit(headers, job_type="echo", payload={"any": "json"})
    assert submitted.status_code == 201, submitted.text

    async def arrived() -> bool:
        return bool(receiver.on("/real"))

    await wait_for(arrived)
    real = json.loads(receiver.on("/real")[0].body)
    example = (await catalogue(api, headers))["job.succeeded"]["example"]
    assert real["type"] == example["type"] == "job.succeeded"
    assert shape(example) == shape(real)
