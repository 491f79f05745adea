"""Concurrency keys and rate limits through the API (docs/flow-control.md), with a job worker in this process: a
job shows the fields it was submitted with; bad values are 422s; a key's jobs never run more than its limit at
once, and `limit: 1` runs them one at a time in submission order; a rate key never starts more than its limit in
any window and fails none; two clients' keys of the same name do not share slots; a throttled job shows
`throttled` once and a job cancelled while throttled never runs; batch items carry the fields."""

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.models.tables import JOBS
from app.workers.jobs.worker import JobWorker
from tests.conftest import start_worker
from tests.support import Api, trail, until_status, wait_for

SLEEP = {"job_type": "sleep"}


@pytest.fixture
async def wide(settings: Settings) -> AsyncIterator[JobWorker]:
    """A job worker with 8 consumers on the default lane: room for more than one key's limit at once."""
    wider = settings.model_copy(update={"job_consumers_default": 8})
    async with start_worker(JobWorker, wider, background=True) as job_worker:
        yield job_worker


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def runs_of(api: Api, headers: dict[str, str], job_id: str) -> list[tuple[datetime, datetime]]:
    """Each run of the job, from its `running` audit row to the row that ended it."""
    entries = await trail(api, headers, job_id)
    spans, start = [], None
    for entry in entries:
        if entry["event"] == "running":
            start = at(entry["created_at"])
        elif start is not None and entry["event"] in ("succeeded", "retrying", "dead_lettered", "cancelled"):
            spans.append((start, at(entry["created_at"])))
            start = None
    return spans


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans], key=lambda edge: (edge[0], edge[1]))
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


async def submit_all(api: Api, headers: dict[str, str], bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    jobs = []
    for body in bodies:  # one at a time: submission order is the order the test checks
        answer = await api.submit(headers, **body)
        assert answer.status_code == 201, answer.text
        jobs.append(answer.json())
    return jobs


async def finished(api: Api, headers: dict[str, str], jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [await until_status(api, headers, job["id"], 60) for job in jobs]


async def test_a_job_shows_its_flow_fields_and_bad_values_are_422s(api: Api) -> None:
    headers = await api.new_client("flow-fields")
    plain = (await api.submit(headers)).json()
    assert (plain["concurrency"], plain["rate_limit"]) == (None, None)
    keyless = await api.client.get(f"/api/v1/jobs/{plain['id']}/concurrency", headers=headers)
    assert keyless.status_code == 404 and keyless.json()["detail"] == "The job has no concurrency key."
    keyed = await api.submit(
        headers,
        concurrency={"key": "user-42", "limit": 2},
        rate_limit={"key": "api.example", "limit": 10, "period_seconds": 1},
    )
    assert keyed.status_code == 201, keyed.text
    shown = await api.job(headers, keyed.json()["id"])
    assert shown["concurrency"] == {"key": "user-42", "limit": 2}
    assert shown["rate_limit"] == {"key": "api.example", "limit": 10, "period_seconds": 1.0}
    for bad in (
        {"concurrency": {"key": "k", "limit": 0}},
        {"concurrency": {"key": "k", "limit": 1001}},
        {"concurrency": {"key": "", "limit": 1}},
        {"concurrency": {"key": "k" * 256, "limit": 1}},
        {"concurrency": {"key": "k"}},
        {"concurrency": {"key": "k", "limit": 1, "extra": 1}},
        {"rate_limit": {"key": "k", "limit": 1, "period_seconds": 0.05}},
        {"rate_limit": {"key": "k", "limit": 1, "period_seconds": 86_401}},
        {"rate_limit": {"key": "k", "limit": 0, "period_seconds": 1}},
    ):
        answer = await api.submit(headers, **bad)
        assert answer.status_code == 422, (bad, answer.text)


async def test_limit_one_runs_a_keys_jobs_one_at_a_time_in_submission_order(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("flow-serial")
    bodies = [{**SLEEP, "payload": {"seconds": 0.05}, "concurrency": {"key": "serial", "limit": 1}}] * 8
    jobs = await submit_all(api, headers, bodies)

    done = await finished(api, headers, jobs)

    assert [job["status"] for job in done] == ["succeeded"] * 8
    spans = [(await runs_of(api, headers, job["id"]))[0] for job in jobs]
    assert most_at_once(spans) == 1
    assert [start for start, _ in spans] == sorted(start for start, _ in spans)  # in submission order
    throttled = [[e for e in await trail(api, headers, j["id"]) if e["event"] == "throttled"] for j in jobs]
    assert all(len(rows) <= 1 for rows in throttled)
    assert any(rows and rows[0]["detail"] == {"key": "serial", "reason": "concurrency"} for rows in throttled)


async def test_a_key_never_runs_more_than_its_limit_and_other_clients_keys_are_their_own(
    api: Api, wide: JobWorker
) -> None:
    clients = [await api.new_client("flow-limit-a"), await api.new_client("flow-limit-b")]
    body = {**SLEEP, "payload": {"seconds": 0.3}, "concurrency": {"key": "shared-name", "limit": 2}}
    jobs: list[list[dict[str, Any]]] = [[], []]
    for _ in range(6):  # the two clients' jobs side by side
        for mine, headers in zip(jobs, clients, strict=True):
            mine += await submit_all(api, headers, [body])

    spans = []
    for mine, headers in zip(jobs, clients, strict=True):
        done = await finished(api, headers, mine)
        assert [job["status"] for job in done] == ["succeeded"] * 6
        spans.append([(await runs_of(api, headers, job["id"]))[0] for job in mine])

    assert [most_at_once(mine) for mine in spans] == [2, 2]
    assert most_at_once(spans[0] + spans[1]) > 2  # the two clients' keys did not share slots


async def test_a_rate_key_starts_at_most_its_limit_in_any_window_and_fails_none(
    api: Api, worker: JobWorker, db: AsyncEngine
) -> None:
    headers = await api.new_client("flow-rate")
    body = {"payload": {"n": 1}, "rate_limit": {"key": "partner", "limit": 2, "period_seconds": 1.5}}
    jobs = await submit_all(api, headers, [body] * 6)

    done = await finished(api, headers, jobs)

    assert [job["status"] for job in done] == ["succeeded"] * 6
    # A start is counted in its window when it is granted; the job runs once its message reaches a worker, a
    # moment later (under load, most of a second). So the third grant of any three waited for the first to leave
    # its window, and each job ran after its grant.
    async with db.connect() as conn:
        query = select(JOBS.c.id, JOBS.c.granted_at).where(JOBS.c.id.in_([job["id"] for job in jobs]))
        granted = {row.id: row.granted_at for row in await conn.execute(query)}
    grants = sorted(granted.values())
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(grants, grants[2:], strict=False)]
    assert min(gaps) >= 1.5, gaps
    assert (grants[-1] - grants[0]).total_seconds() >= 3.0  # six starts at two a window: two windows more
    for job in jobs:  # the audit row's stamp as the API shows it, to the millisecond
        assert (await runs_of(api, headers, job["id"]))[0][0] >= granted[job["id"]] - timedelta(milliseconds=1)


async def test_a_job_cancelled_while_throttled_never_runs_and_the_rest_run(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("flow-cancel")
    body = {**SLEEP, "payload": {"seconds": 0.5}, "concurrency": {"key": "one", "limit": 1}}
    # The first runs long enough to be seen running while the others are held, however slow the machine.
    first = {**body, "payload": {"seconds": 5}}
    running, waiting, after = await submit_all(api, headers, [first, body, body])
    await until_status(api, headers, running["id"], 20, "running")

    async def throttled() -> bool:  # both jobs behind the running one held back
        trails = [await trail(api, headers, job["id"]) for job in (waiting, after)]
        return all(any(e["event"] == "throttled" for e in entries) for entries in trails)

    await wait_for(throttled, within=15)
    key = await api.client.get(f"/api/v1/jobs/{waiting['id']}/concurrency", headers=headers)
    assert key.status_code == 200, key.text
    assert key.json() == {"key": "one", "limit": 1, "running": 1, "waiting": 2}
    cancelled = await api.client.post(f"/api/v1/jobs/{waiting['id']}/cancel", headers=headers)
    assert cancelled.status_code == 200, cancelled.text

    assert (await until_status(api, headers, after["id"], 30))["status"] == "succeeded"
    assert (await api.job(headers, waiting["id"]))["status"] == "cancelled"
    assert "running" not in [e["event"] for e in await trail(api, headers, waiting["id"])]


async def test_batch_items_carry_the_flow_fields(api: Api) -> None:
    headers = await api.new_client("flow-batch")
    items = [{"job_type": "echo", "payload": {"n": n}, "concurrency": {"key": "b", "limit": 1}} for n in range(2)]
    answer = await api.client.post("/api/v1/jobs/batch", json={"jobs": items}, headers=headers)
    assert answer.status_code in (200, 201, 207), answer.text
    assert [item["job"]["concurrency"] for item in answer.json()["items"]] == [{"key": "b", "limit": 1}] * 2
