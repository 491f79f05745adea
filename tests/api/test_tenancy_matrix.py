"""Client isolation, route by route: another client's object answers exactly as a missing one, and no list shows it.

Every documented route with a path parameter is in the matrix (or is admin-only); a new one fails the coverage
check below until it is added here.
"""

import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from app.core.failure_groups import group_of
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.receiver import Receiver
from tests.support import Api, until_status, wait_for

SINCE = {"since": "2020-01-01T00:00:00Z"}
DOCUMENT = {"title": "Owned", "content": [{"type": "paragraph", "text": "only for the owner"}]}


@dataclass(frozen=True)
class Case:
    """One route: its method, its path with `{kind}` where the id goes, and the body it takes."""

    method: str
    path: str
    kind: str  # the owner's: job, artifact_job, dead_job, webhook, delivery, schedule, workflow, redrive, group (its
    # dead job's)
    body: dict[str, Any] | None = None

    @property
    def route(self) -> tuple[str, str]:
        param = {"job": "job_id", "artifact_job": "job_id", "dead_job": "job_id"}.get(self.kind, f"{self.kind}_id")
        return self.method, self.path.replace("{id}", "{" + param + "}")


# Destructive calls last, so the owner's later reads still find every object.
MATRIX = [
    Case("GET", "/api/v1/jobs/{id}", "job"),
    Case("GET", "/api/v1/jobs/{id}/events", "job"),
    Case("GET", "/api/v1/jobs/{id}/logs", "job"),
    Case("GET", "/api/v1/jobs/{id}/artifact", "artifact_job"),
    Case("GET", "/api/v1/jobs/{id}/stream", "job"),
    Case("GET", "/api/v1/jobs/{id}/concurrency", "job"),
    Case("GET", "/api/v1/webhooks/{id}", "webhook"),
    Case("GET", "/api/v1/webhooks/{id}/deliveries", "webhook"),
    Case("GET", "/api/v1/webhooks/{id}/stats", "webhook"),
    Case("PATCH", "/api/v1/webhooks/{id}", "webhook", {"description": "taken over"}),
    Case("POST", "/api/v1/webhooks/{id}/test", "webhook"),
    Case("POST", "/api/v1/webhooks/{id}/recover", "webhook", SINCE),
    Case("POST", "/api/v1/deliveries/{id}/redeliver", "delivery"),
    Case("GET", "/api/v1/schedules/{id}", "schedule"),
    Case("PATCH", "/api/v1/schedules/{id}", "schedule", {"name": "taken over"}),
    Case("POST", "/api/v1/schedules/{id}/trigger", "schedule"),
    Case("GET", "/api/v1/workflows/{id}", "workflow"),
    Case("GET", "/api/v1/dlq/redrives/{id}", "redrive"),
    Case("POST", "/api/v1/dlq/redrives/{id}/pause", "redrive"),
    Case("POST", "/api/v1/dlq/redrives/{id}/resume", "redrive"),
    Case("PATCH", "/api/v1/dlq/redrives/{id}", "redrive", {"per_second": 5}),
    Case("POST", "/api/v1/dlq/redrives/{id}/cancel", "redrive"),
    Case("GET", "/api/v1/dlq/groups/{id}", "group"),
    Case("POST", "/api/v1/workflows/{id}/cancel", "workflow"),
    Case("POST", "/api/v1/webhooks/{id}/rotate-secret", "webhook"),
    Case("POST", "/api/v1/jobs/{id}/cancel", "job"),
    Case("POST", "/api/v1/jobs/{id}/retry", "dead_job"),
    Case("POST", "/api/v1/dlq/{id}/replay", "dead_job", {"payload": {"fail_times": 0}}),
    Case("DELETE", "/api/v1/webhooks/{id}", "webhook"),
    Case("DELETE", "/api/v1/schedules/{id}", "schedule"),
]
# Routes no client key may call at all: a client gets 403 whatever the id.
ADMIN_ONLY = {
    ("DELETE", "/api/v1/api-keys/{key_id}"),
    ("GET", "/api/v1/workers/{name}"),
    ("POST", "/api/v1/workers/{name}/stop"),
    ("POST", "/api/v1/workers/{name}/start"),
    ("POST", "/api/v1/job-types/{job_type}/pause"),
    ("POST", "/api/v1/job-types/{job_type}/resume"),
}
MISSING = {
    "job": str(uuid.uuid4()),
    "webhook": str(uuid.uuid4()),
    "delivery": "msg_" + uuid.uuid4().hex,
    "schedule": str(uuid.uuid4()),
    "workflow": str(uuid.uuid4()),
    "redrive": str(uuid.uuid4()),
    "group": "0123456789abcdef",
}
SCHEDULE = {"name": "owned", "cron": "0 3 * * *", "job": {"job_type": "echo", "payload": {}}}
WORKFLOW = {
    "jobs": [
        {"ref": "a", "job_type": "echo", "payload": {}},
        {"ref": "b", "job_type": "echo", "payload": {}, "depends_on": ["a"]},
    ]
}

# A redrive that takes nothing (no delivery has that event type): finished at once, it changes nothing.
REDRIVE = {"kind": "deliveries", "event_type": "job.never", "limit": 10, "per_second": 1}


def test_every_route_with_a_path_parameter_is_in_the_matrix(api: Api) -> None:
    # The OpenAPI document walks every router the app includes, however FastAPI nests them.
    routed = {
        (method.upper(), path) for path, item in api.app.openapi()["paths"].items() if "{" in path for method in item
    }
    assert routed == {case.route for case in MATRIX} | ADMIN_ONLY


async def test_another_clients_objects_answer_as_missing_ones_and_are_never_listed(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    owner, other = await api.new_client("tenant-owner"), await api.new_client("tenant-other")
    objects = await _owned_objects(api, owner, receiver)
    for case in MATRIX:
        theirs = await _call(api, case, objects[case.kind], other)
        missing = await _call(api, case, MISSING[case.kind.removeprefix("artifact_").removeprefix("dead_")], other)
        assert theirs.status_code == missing.status_code == 404, case
        assert _shape(theirs) == _shape(missing), case
        assert theirs.json()["code"] == "not_found", case
    for case in MATRIX:  # the objects were there all along, and the other client's calls changed nothing
        mine = await _call(api, case, objects[case.kind], owner)
        assert mine.status_code in (200, 201, 202, 204, 409), (case, mine.text)
    for method, path in ADMIN_ONLY:
        answer = await api.client.request(
            method,
            path.replace("{key_id}", "k").replace("{name}", "job_worker").replace("{job_type}", "echo"),
            headers=other,
        )
        assert answer.status_code == 403, (method, path)
    await _lists_never_show(api, other, objects)


async def _owned_objects(api: Api, owner: dict[str, str], receiver: Receiver) -> dict[str, str]:
    """A job made by a batch (with a delivery), a job with an artifact, a dead-lettered job, an endpoint."""
    hook = await api.client.post("/api/v1/webhooks", json={"url": receiver.url("/owner")}, headers=owner)
    assert hook.status_code == 201, hook.text
    schedule = await api.client.post("/api/v1/schedules", json=SCHEDULE, headers=owner)
    assert schedule.status_code == 201, schedule.text
    workflow = await api.client.post("/api/v1/workflows", json=WORKFLOW, headers=owner)
    assert workflow.status_code == 201, workflow.text
    redrive = await api.client.post("/api/v1/dlq/redrives", json=REDRIVE, headers=owner)
    assert redrive.status_code == 201, redrive.text
    batch = await api.client.post(
        "/api/v1/jobs/batch",
        json={"jobs": [{"job_type": "echo", "payload": {}, "concurrency": {"key": "owned", "limit": 1}}]},
        headers=owner,
    )
    assert batch.status_code == 201, batch.text
    job_id = batch.json()["items"][0]["job"]["id"]
    document = (await api.submit(owner, job_type="document", payload=DOCUMENT)).json()
    dead = (
        await api.submit(owner, job_type="flaky", payload={"fail_times": 9, "permanent": True}, max_retries=0)
    ).json()
    assert (await until_status(api, owner, document["id"], 60))["status"] == "succeeded"
    died = await until_status(api, owner, dead["id"])
    assert died["status"] == "dead_lettered"
    assert (await until_status(api, owner, job_id))["status"] == "succeeded"

    async def delivered() -> list[dict[str, Any]]:
        logs: list[dict[str, Any]] = (await api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=owner)).json()
        return [d for d in logs if d["status"] == "succeeded"]

    [delivery] = await wait_for(delivered)
    return {
        "job": job_id,
        "artifact_job": document["id"],
        "dead_job": dead["id"],
        "webhook": hook.json()["id"],
        "delivery": delivery["id"],
        "schedule": schedule.json()["id"],
        "workflow": workflow.json()["id"],
        "redrive": redrive.json()["id"],
        "group": group_of("flaky", died["error"]),
    }


async def _call(api: Api, case: Case, object_id: str, headers: dict[str, str]) -> httpx.Response:
    return await api.client.request(case.method, case.path.replace("{id}", object_id), json=case.body, headers=headers)


def _shape(answer: httpx.Response) -> tuple[str, dict[str, Any]]:
    """What a client can compare: content type and body."""
    body: dict[str, Any] = answer.json()
    return answer.headers["content-type"], body


async def _lists_never_show(api: Api, other: dict[str, str], objects: dict[str, str]) -> None:
    owned = set(objects.values())
    for path in (
        "/api/v1/jobs",
        "/api/v1/jobs?status=succeeded",
        "/api/v1/dlq",
        "/api/v1/schedules",
        "/api/v1/workflows",
        "/api/v1/dlq/redrives",
    ):
        answer = await api.client.get(path, headers=other)
        assert answer.status_code == 200 and answer.json()["items"] == [], path
    assert (await api.client.get("/api/v1/webhooks", headers=other)).json() == []
    stats = (await api.client.get("/api/v1/dlq/stats", headers=other)).json()
    assert stats["dead_lettered"] == 0 and stats["by_job_type"] == {}
    for search in ({"q": objects["job"]}, {"id": objects["dead_job"]}, {"payload.title": "Owned"}):
        found = await api.client.get("/api/v1/jobs", params=search, headers=other)
        assert found.status_code == 200 and found.json()["items"] == [], search
    bulk = {"action": "retry", "job_ids": [objects["dead_job"]]}
    answer = await api.client.post("/api/v1/jobs/bulk", json=bulk, headers=other)
    assert answer.json()["items"] == [{"job_id": objects["dead_job"], "outcome": "not_found", "status": None}]
    replay = await api.client.post("/api/v1/dlq/replay", json={"job_ids": [objects["dead_job"]]}, headers=other)
    assert replay.json() == {"replayed": 0, "job_ids": []}
    replay = await api.client.post("/api/v1/dlq/replay", json={"group": objects["group"]}, headers=other)
    assert replay.json() == {"replayed": 0, "job_ids": []}
    assert (await api.client.get("/api/v1/dlq/groups", headers=other)).json()["items"] == []
    assert (await api.client.get(f"/api/v1/dlq?group={objects['group']}", headers=other)).json()["items"] == []
    # The other client's own endpoint and job: their logs and deliveries hold nothing of the owner's.
    hook = (await api.client.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/x"}, headers=other)).json()
    recovered = await api.client.post(f"/api/v1/webhooks/{hook['id']}/recover", json=SINCE, headers=other)
    assert recovered.json() == {"recovered": 0, "delivery_ids": []}
    deliveries = (await api.client.get(f"/api/v1/webhooks/{hook['id']}/deliveries", headers=other)).json()
    assert owned.isdisjoint(d["id"] for d in deliveries) and owned.isdisjoint(d["job_id"] for d in deliveries)
    seen = {j["id"] for j in (await api.client.get("/api/v1/jobs?limit=200", headers=api.admin)).json()["items"]}
    assert objects["job"] in seen  # the lists can show these jobs: to their owner and an admin
