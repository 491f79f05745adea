"""The event catalogue (GET /api/v1/event-types): every type a receiver can get, with the JSON Schema of its body and
an example, both checked against real deliveries a loopback receiver got, of every type."""

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from jsonschema import Draft202012Validator

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


def problems(body: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, error.absolute_path))}: {error.message}" for error in validator.iter_errors(body)]


async def test_every_schema_is_valid_and_its_example_fits_it(api: Api) -> None:
    for kind in (await catalogue(api, await api.new_client("catalogue-schemas"))).values():
        Draft202012Validator.check_schema(kind["schema"])
        assert problems(kind["example"], kind["schema"]) == [], kind["type"]
    assert problems({"id": "x", "type": "job.succeeded"}, kind["schema"]) != []  # the check can fail


async def test_a_real_delivery_of_every_type_fits_its_schema(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("catalogue-every")
    hook = {"url": receiver.url("/every"), "events": list(SUBSCRIBABLE_EVENTS)}
    created = await api.client.post("/api/v1/webhooks", json=hook, headers=headers)
    assert created.status_code == 201, created.text
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    fail = {"job_type": "flaky", "payload": {"fail_times": 100, "permanent": True}, "max_retries": 0}
    jobs = [
        {"job_type": "echo", "payload": {"any": "json"}},  # succeeded
        {"job_type": "flaky", "payload": {"fail_times": 1}},  # retrying, then succeeded
        fail,  # dead_lettered
        {"job_type": "sleep", "payload": {"seconds": 1.2, "progress": True}},  # progress
        {"job_type": "echo", "payload": {}, "run_at": later},  # cancelled below
    ]
    ids = []
    for request in jobs:
        answer = await api.client.post("/api/v1/jobs", json=request, headers=headers)
        assert answer.status_code == 201, answer.text
        ids.append(answer.json()["id"])
    assert (await api.client.post(f"/api/v1/jobs/{ids[-1]}/cancel", headers=headers)).status_code == 200
    for workflow in ([{"ref": "a", "job_type": "echo", "payload": {}}], [{"ref": "a", **fail}]):
        answer = await api.client.post("/api/v1/workflows", json={"jobs": workflow}, headers=headers)
        assert answer.status_code == 201, answer.text
    answer = await api.client.post(
        "/api/v1/workflows",
        json={"jobs": [{"ref": "a", "job_type": "echo", "payload": {}, "run_at": later}]},
        headers=headers,
    )
    assert answer.status_code == 201, answer.text
    cancelled = await api.client.post(f"/api/v1/workflows/{answer.json()['id']}/cancel", headers=headers)
    assert cancelled.status_code == 200, cancelled.text
    tested = await api.client.post(f"/api/v1/webhooks/{created.json()['id']}/test", headers=headers)
    assert tested.status_code in (200, 202), tested.text

    def received() -> dict[str, dict[str, Any]]:
        bodies = [json.loads(request.body) for request in receiver.on("/every")]
        return {body["type"]: body for body in bodies}

    async def every_type() -> bool:
        return set(received()) >= {*SUBSCRIBABLE_EVENTS, TEST_EVENT}

    await wait_for(every_type, within=30)
    kinds = await catalogue(api, headers)
    assert {kind: problems(body, kinds[kind]["schema"]) for kind, body in received().items()} == {
        kind: [] for kind in kinds
    }
