"""`?wait=` on submit and on reading a job: answered by the worker's direct reply, from the database always."""

import time
from typing import Any

import pytest

from app.core.replies import ReplyInbox
from app.workers.jobs.worker import JobWorker
from tests.support import Api


def inbox(api: Api) -> ReplyInbox:
    replies: ReplyInbox = api.app.state.api.replies
    return replies


async def submit_waiting(
    api: Api, headers: dict[str, str], wait: float, status: int = 201, **body: Any
) -> tuple[dict[str, Any], float]:
    body.setdefault("job_type", "echo")
    body.setdefault("payload", {"n": 1})
    started = time.monotonic()
    answer = await api.client.post("/api/v1/jobs", params={"wait": wait}, json=body, headers=headers, timeout=wait + 10)
    assert answer.status_code == status, answer.text
    job: dict[str, Any] = answer.json()
    return job, time.monotonic() - started


async def test_a_quick_job_answers_early_and_through_the_reply(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wait-quick")
    before = inbox(api).received
    job, took = await submit_waiting(api, headers, 10)
    assert job["status"] == "succeeded" and job["result"] is not None
    assert took < 5  # well before the 10 s deadline
    assert inbox(api).received >= before + 1
    assert (await api.job(headers, job["id"]))["status"] == "succeeded"


async def test_a_slow_job_answers_when_the_wait_runs_out(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wait-slow")
    job, took = await submit_waiting(api, headers, 1, job_type="sleep", payload={"seconds": 4})
    assert job["status"] in ("queued", "running")
    assert 1 <= took < 4  # answered at the deadline, while the job still runs


async def test_get_waits_for_a_job_that_finishes_meanwhile(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wait-get")
    submitted = await api.submit(headers, job_type="sleep", payload={"seconds": 0.5})
    assert submitted.status_code == 201 and submitted.json()["status"] == "queued"
    started = time.monotonic()
    answer = await api.client.get(
        f"/api/v1/jobs/{submitted.json()['id']}", params={"wait": 20}, headers=headers, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "succeeded"
    assert time.monotonic() - started < 10


async def test_a_dead_lettered_job_answers_dead_lettered(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wait-dead")
    before = inbox(api).received
    job, took = await submit_waiting(api, headers, 10, job_type="flaky", payload={"fail_times": 5, "permanent": True})
    assert job["status"] == "dead_lettered" and job["error"] is not None
    assert took < 5
    assert inbox(api).received >= before + 1


async def test_a_retried_job_still_replies_after_its_delay(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wait-retry")
    before = inbox(api).received
    job, _ = await submit_waiting(api, headers, 15, job_type="flaky", payload={"fail_times": 1}, max_retries=2)
    assert job["status"] == "succeeded" and job["attempts"] == 2
    assert inbox(api).received >= before + 1  # the reply address survived the delay tier


async def test_a_repeated_submit_has_no_message_and_polls_the_database(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wait-repeat")
    body: dict[str, Any] = {"job_type": "sleep", "payload": {"seconds": 0.5}, "idempotency_key": "once"}
    first = await api.client.post("/api/v1/jobs", json=body, headers=headers)
    assert first.status_code == 201 and first.json()["status"] == "queued"
    before = inbox(api).received
    job, took = await submit_waiting(api, headers, 20, status=200, **body)  # the earlier job: nothing published
    assert job["id"] == first.json()["id"] and job["status"] == "succeeded"
    assert took < 10 and inbox(api).received == before


async def test_a_finished_job_answers_at_once(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("wait-done")
    job, _ = await submit_waiting(api, headers, 10)
    assert job["status"] == "succeeded"
    started = time.monotonic()
    again = await api.client.get(f"/api/v1/jobs/{job['id']}", params={"wait": 30}, headers=headers, timeout=40)
    assert again.json()["status"] == "succeeded" and time.monotonic() - started < 10


@pytest.mark.parametrize("wait", ["0", "61", "abc", "-1", "nan"])
async def test_a_bad_wait_is_a_422(api: Api, wait: str) -> None:
    headers = await api.new_client("wait-bad")
    submitted = await api.client.post(
        "/api/v1/jobs", params={"wait": wait}, json={"job_type": "echo", "payload": {}}, headers=headers
    )
    read = await api.client.get("/api/v1/jobs/whatever", params={"wait": wait}, headers=headers)
    for answer in (submitted, read):
        assert answer.status_code == 422, answer.text
        assert answer.json()["code"] == "validation_error"
        assert [e["loc"] for e in answer.json()["errors"]] == [["query", "wait"]]


async def test_another_clients_job_is_404_even_when_waiting(api: Api) -> None:
    owner = await api.new_client("wait-owner")
    job = (await api.submit(owner)).json()
    stranger = await api.new_client("wait-stranger")
    answer = await api.client.get(f"/api/v1/jobs/{job['id']}", params={"wait": 5}, headers=stranger)
    assert answer.status_code == 404
