"""Workflows through the API with a job worker in this process (CONTRACT.md "Workflows"): a diamond ends in order
with its last job released once; a failure cancels everything downstream, or on `continue` lets it run; a
replayed dependency releases what still waits for it and runs its workflow again; a workflow cancelled while a
job runs ends once that job has; a handler reads its dependencies' results; bad graphs and bodies are 422s with
nothing saved; another client's workflow is a 404."""

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime
from itertools import pairwise
from typing import Any

import pytest

from app.core.config import Settings
from app.workers.jobs.worker import JobWorker
from tests.conftest import start_worker
from tests.receiver import Receiver
from tests.support import Api, trail, wait_for

FAIL = {"job_type": "flaky", "payload": {"fail_times": 100, "permanent": True}, "max_retries": 0}


def job(ref: str, *depends_on: str, **request: Any) -> dict[str, Any]:
    return {"ref": ref, "depends_on": list(depends_on), "job_type": "echo", "payload": {"ref": ref}, **request}


@pytest.fixture
async def worker(settings: Settings) -> AsyncIterator[JobWorker]:
    async with start_worker(JobWorker, settings, background=True) as running:
        yield running


async def submit(api: Api, headers: dict[str, str], jobs: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    answer = await api.client.post("/api/v1/workflows", json={"jobs": jobs, **body}, headers=headers)
    assert answer.status_code == 201, answer.text
    workflow: dict[str, Any] = answer.json()
    return workflow


async def until_ended(api: Api, headers: dict[str, str], workflow_id: str, within: float = 30) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        answer = await api.client.get(f"/api/v1/workflows/{workflow_id}", headers=headers)
        assert answer.status_code == 200, answer.text
        found: dict[str, Any] = answer.json()
        return found if found["status"] != "running" else None

    return await wait_for(ended, within=within)


def by_ref(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["ref"]: entry["job"] for entry in workflow["jobs"]}


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def test_a_diamond_ends_in_order_with_its_last_job_released_once(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wf-diamond")
    created = await submit(api, headers, [job("a"), job("b", "a"), job("c", "a"), job("d", "b", "c")], name="diamond")

    assert created["status"] == "running" and created["name"] == "diamond"
    assert created["on_failure"] == "cancel_dependents" and created["finished_at"] is None
    assert [(e["ref"], e["depends_on"]) for e in created["jobs"]] == [
        ("a", []),
        ("b", ["a"]),
        ("c", ["a"]),
        ("d", ["b", "c"]),
    ]
    first = by_ref(created)
    assert first["a"]["status"] in ("pending", "queued")
    assert {first[r]["status"] for r in "bcd"} == {"waiting"}
    assert first["d"]["depends_on"] == [first["b"]["id"], first["c"]["id"]]
    assert {j["workflow_id"] for j in first.values()} == {created["id"]}

    ended = await until_ended(api, headers, created["id"])
    assert ended["status"] == "succeeded" and ended["finished_at"] is not None
    assert ended["counts"] == {"succeeded": 4}
    jobs = by_ref(ended)
    assert at(jobs["a"]["finished_at"]) <= min(at(jobs["b"]["started_at"]), at(jobs["c"]["started_at"]))
    assert max(at(jobs["b"]["finished_at"]), at(jobs["c"]["finished_at"])) <= at(jobs["d"]["started_at"])
    events = [e["event"] for e in await trail(api, headers, jobs["d"]["id"])]
    assert events == ["created", "waiting", "pending", "queued", "running", "succeeded"]
    assert jobs["d"]["attempts"] == 1
    single = await api.job(headers, jobs["d"]["id"])
    assert (single["workflow_id"], single["ref"]) == (created["id"], "d")


async def test_a_failure_cancels_everything_downstream_and_nothing_else(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wf-cancel")
    created = await submit(api, headers, [{**FAIL, "ref": "a"}, job("b", "a"), job("c", "b"), job("x")])

    ended = await until_ended(api, headers, created["id"])
    assert ended["status"] == "failed"
    jobs = by_ref(ended)
    assert {r: jobs[r]["status"] for r in "abcx"} == {
        "a": "dead_lettered",
        "b": "cancelled",
        "c": "cancelled",
        "x": "succeeded",
    }
    assert jobs["c"]["started_at"] is None
    cancelled = [e for e in await trail(api, headers, jobs["c"]["id"]) if e["event"] == "cancelled"]
    assert [(e["detail"]["from"], e["detail"]["reason"]) for e in cancelled] == [("waiting", "dependency_failed")]


async def test_on_continue_a_dependent_runs_once_its_dependencies_have_all_ended(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wf-continue")
    jobs = [{**FAIL, "ref": "a"}, job("b"), job("c", "a", "b")]
    created = await submit(api, headers, jobs, on_failure="continue")

    ended = await until_ended(api, headers, created["id"])
    assert ended["status"] == "failed"  # a job was dead-lettered, though its dependent ran
    found = by_ref(ended)
    assert {r: found[r]["status"] for r in "abc"} == {"a": "dead_lettered", "b": "succeeded", "c": "succeeded"}


async def test_a_replayed_dependency_releases_what_still_waits_for_it(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wf-replay")
    once = {"job_type": "flaky", "payload": {"fail_times": 1, "permanent": True}, "max_retries": 0}
    slow = {"job_type": "sleep", "payload": {"seconds": 1.5}}
    created = await submit(
        api, headers, [{**once, "ref": "a"}, {**slow, "ref": "g"}, job("c", "a", "g")], on_failure="continue"
    )
    ids = {entry["ref"]: entry["job"]["id"] for entry in created["jobs"]}

    await wait_for(lambda: _with_status(api, headers, ids["a"], "dead_lettered"), within=20)
    assert (await api.job(headers, ids["c"]))["status"] == "waiting"  # g still runs
    retried = await api.client.post(f"/api/v1/jobs/{ids['a']}/retry", headers=headers)
    assert retried.status_code == 200, retried.text

    ended = await until_ended(api, headers, created["id"])
    assert ended["status"] == "succeeded"
    jobs = by_ref(ended)
    assert at(jobs["a"]["finished_at"]) <= at(jobs["c"]["started_at"])
    assert at(jobs["g"]["finished_at"]) <= at(jobs["c"]["started_at"])
    events = [e["event"] for e in await trail(api, headers, ids["c"])]
    assert (events.count("pending"), events.count("running")) == (1, 1)


async def test_a_failed_workflow_runs_again_when_its_dead_job_is_replayed(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wf-again")
    once = {"job_type": "flaky", "payload": {"fail_times": 1, "permanent": True}, "max_retries": 0}
    created = await submit(api, headers, [{**once, "ref": "a"}])
    failed = await until_ended(api, headers, created["id"])
    assert failed["status"] == "failed"

    replayed = await api.client.post(
        "/api/v1/dlq/replay", json={"job_ids": [by_ref(failed)["a"]["id"]]}, headers=headers
    )
    assert replayed.status_code == 200, replayed.text
    again = await api.client.get(f"/api/v1/workflows/{created['id']}", headers=headers)
    assert again.json()["status"] in ("running", "succeeded")
    ended = await until_ended(api, headers, created["id"])
    assert ended["status"] == "succeeded" and ended["counts"] == {"succeeded": 1}


async def test_cancelling_a_workflow_cancels_what_has_not_started_and_stops_what_runs(
    api: Api, worker: JobWorker
) -> None:
    headers = await api.new_client("wf-stop")
    slow = {"job_type": "sleep", "payload": {"seconds": 60}}
    created = await submit(api, headers, [{**slow, "ref": "a"}, job("b", "a"), job("c", "b")])
    ids = {entry["ref"]: entry["job"]["id"] for entry in created["jobs"]}
    await wait_for(lambda: _with_status(api, headers, ids["a"], "running"), within=20)

    answer = await api.client.post(f"/api/v1/workflows/{created['id']}/cancel", headers=headers)
    assert answer.status_code == 200, answer.text
    now = by_ref(answer.json())
    assert (now["a"]["status"], now["b"]["status"], now["c"]["status"]) == ("running", "cancelled", "cancelled")
    assert now["a"]["cancel_requested"] is True and answer.json()["status"] == "running"

    ended = await until_ended(api, headers, created["id"], within=5)  # not the 60 s the sleep would take
    assert ended["status"] == "cancelled"
    assert by_ref(ended)["a"]["status"] == "cancelled"
    last = (await trail(api, headers, ids["a"]))[-1]
    assert (last["event"], last["detail"]["from"]) == ("cancelled", "running")


async def test_a_handler_reads_its_dependencies_results(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    headers = await api.new_client("wf-results")
    render = {"ref": "render", "job_type": "document", "payload": {"template": "invoice", "pages": 1}}
    notify = {
        "ref": "notify",
        "depends_on": ["render"],
        "job_type": "notification",
        "payload": {"url": receiver.url("/done"), "body": {"order": 7}, "include_dependencies": True},
    }
    created = await submit(api, headers, [render, notify])
    ended = await until_ended(api, headers, created["id"], within=60)
    assert ended["status"] == "succeeded", ended
    [call] = receiver.on("/done")
    sent = json.loads(call.body)
    assert sent["order"] == 7
    assert sent["dependencies"]["render"] == by_ref(ended)["render"]["result"]
    assert sent["dependencies"]["render"]["artifact_url"].endswith(
        f"/api/v1/jobs/{by_ref(ended)['render']['id']}/artifact"
    )


@pytest.mark.parametrize(
    ("jobs", "index", "kind"),
    [
        ([job("a", "b"), job("b", "a")], 0, "cycle"),
        ([job("a"), job("b", "c", "a"), job("c", "b")], 1, "cycle"),
        ([job("a", "a")], 0, "cycle"),
        ([job("a"), job("b", "nope")], 1, "depends_on"),
        ([job("a"), job("a")], 1, "ref"),
        ([job("a"), {"job_type": "echo", "payload": {}}], 1, "ref"),
        ([job("a"), job("b", "a", delay_seconds=5)], 1, "depends_on"),
    ],
)
async def test_a_bad_graph_is_a_422_naming_the_item_and_saves_nothing(
    api: Api, jobs: list[dict[str, Any]], index: int, kind: str
) -> None:
    headers = await api.new_client(f"wf-bad-{index}-{kind}")
    answer = await api.client.post("/api/v1/workflows", json={"jobs": jobs}, headers=headers)
    assert answer.status_code == 422, answer.text
    error = answer.json()
    assert [e["loc"][:3] for e in error["errors"]] == [["body", "jobs", index]]
    assert error["errors"][0]["type"] == kind
    await _nothing_saved(api, headers)


async def test_too_many_jobs_or_none_is_a_422_and_saves_nothing(api: Api) -> None:
    headers = await api.new_client("wf-size")
    for jobs in ([job(f"j{n}") for n in range(501)], []):
        answer = await api.client.post("/api/v1/workflows", json={"jobs": jobs}, headers=headers)
        assert answer.status_code == 422, answer.text
    await _nothing_saved(api, headers)


async def test_another_clients_workflow_is_not_found(api: Api) -> None:
    mine, theirs = await api.new_client("wf-mine"), await api.new_client("wf-theirs")
    created = await submit(api, mine, [job("a"), job("b", "a")])
    for method, path in (("GET", ""), ("POST", "/cancel")):
        answer = await api.client.request(method, f"/api/v1/workflows/{created['id']}{path}", headers=theirs)
        assert answer.status_code == 404, answer.text
    listed = await api.client.get("/api/v1/workflows", headers=theirs)
    assert listed.json()["items"] == []
    listed = await api.client.get("/api/v1/workflows?status=running", headers=mine)
    assert [(w["id"], w["jobs"]) for w in listed.json()["items"]] == [(created["id"], [])]


async def _nothing_saved(api: Api, headers: dict[str, str]) -> None:
    for path in ("/api/v1/workflows", "/api/v1/jobs"):
        answer = await api.client.get(path, headers=headers)
        assert answer.status_code == 200 and answer.json()["items"] == [], answer.text


async def _with_status(api: Api, headers: dict[str, str], job_id: str, status: str) -> dict[str, Any] | None:
    found = await api.job(headers, job_id)
    await asyncio.sleep(0)
    return found if found["status"] == status else None


async def test_a_workflows_jobs_keep_to_their_concurrency_key_once_released(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wf-keyed")
    keyed = {"job_type": "sleep", "payload": {"seconds": 0.2}, "concurrency": {"key": "printer", "limit": 1}}
    children = [{**keyed, "ref": f"k{n}", "depends_on": ["root"]} for n in range(4)]
    created = await submit(api, headers, [job("root"), *children])

    ended = await until_ended(api, headers, created["id"])
    assert ended["status"] == "succeeded"
    runs = sorted((at(j["started_at"]), at(j["finished_at"])) for r, j in by_ref(ended).items() if r != "root")
    assert all(earlier[1] <= later[0] for earlier, later in pairwise(runs))  # one at a time


async def test_an_items_idempotency_key_taken_before_is_a_409_naming_that_item(api: Api) -> None:
    headers = await api.new_client("wf-keys")
    await submit(api, headers, [job("a", idempotency_key="k1")])
    again = [job("x"), job("y", idempotency_key="k0"), job("z", idempotency_key="k1")]
    answer = await api.client.post("/api/v1/workflows", json={"jobs": again}, headers=headers)
    assert answer.status_code == 409, answer.text
    assert (answer.json()["code"], answer.json()["index"]) == ("idempotency_conflict", 2)
    listed = (await api.client.get("/api/v1/workflows", headers=headers)).json()["items"]
    assert len(listed) == 1  # nothing of the second was saved
