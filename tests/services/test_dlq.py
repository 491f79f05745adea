"""The dead-letter queue as a resource: inspect, replay by id or type, the janitor, retry and cancel."""

import asyncio
import signal
from pathlib import Path
from typing import Any

import aio_pika
import httpx
import pytest
from loguru import logger
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Lane
from app.core.resources import Resources
from app.models.tables import JOB_EVENTS, JOBS
from app.services.upkeep.janitor import DlqJanitor
from app.workers.jobs.worker import JobWorker
from tests.conftest import make_settings, settings_env
from tests.support import Api, BrokerProbe, app_process, free_port, trail, until_serving, until_status, wait_for


async def dead_jobs(api: Api, headers: dict[str, str], n: int, **body: Any) -> list[dict[str, Any]]:
    """`n` jobs that die on their first run (and would succeed on a second)."""
    body = {"job_type": "flaky", "payload": {"fail_times": 1, "permanent": True}, "max_retries": 0, **body}
    jobs = [(await api.submit(headers, **body)).json() for _ in range(n)]
    return [await until_status(api, headers, job["id"], 30) for job in jobs]


async def janitor_sweep(broker: BrokerProbe) -> dict[str, int]:
    settings = make_settings()
    resources = await Resources.open(settings, role="test-janitor")
    try:
        names = resources.names
        return await DlqJanitor(resources.engine, resources.broker, names.jobs_dlq, names.webhooks_dlq).sweep()
    finally:
        await resources.close()


async def dlq_ids(broker: BrokerProbe) -> list[str]:
    """The job ids in the broker's DLQ, in order, left in place (a probe consumer would take them)."""
    channel = await broker.connection.channel()
    queue = await channel.declare_queue(broker.topology.names.jobs_dlq, passive=True)
    taken = []
    while (message := await queue.get(no_ack=False, fail=False)) is not None:
        taken.append(message)
    ids = [m.message_id or "" for m in taken]
    for message in taken:
        await message.nack(requeue=True)
    await channel.close()
    return ids


async def test_replay_by_type_runs_each_once_and_the_janitor_cleans_the_broker_dlq(
    api: Api, worker: JobWorker, broker: BrokerProbe
) -> None:
    await broker.purge(broker.topology.names.jobs_dlq)
    headers = await api.new_client("dlq-type")
    flaky = await dead_jobs(api, headers, 20)
    sleepy = await dead_jobs(api, headers, 3, job_type="sleep", payload={"seconds": 5}, timeout_seconds=0.1)
    assert {j["status"] for j in flaky + sleepy} == {"dead_lettered"}

    async def all_in_dlq() -> bool:
        return await broker.depth(broker.topology.names.jobs_dlq) == 23

    await wait_for(all_in_dlq)
    before = (await api.client.get("/api/v1/dlq/stats", headers=headers)).json()
    assert before == {
        "dead_lettered": 23,
        "by_job_type": {"flaky": 20, "sleep": 3},
        "by_reason": {"permanent_error": 20, "timeout": 3},
    }  # no broker_depth for a non-admin key
    listed = (await api.client.get("/api/v1/dlq?job_type=sleep", headers=headers)).json()["items"]
    assert {j["id"] for j in listed} == {j["id"] for j in sleepy}
    assert {(j["reason"], j["attempts"], j["error"]["type"]) for j in listed} == {("timeout", 1, "JobTimeout")}

    answer = await api.client.post("/api/v1/dlq/replay", json={"job_type": "flaky"}, headers=headers)
    assert answer.status_code == 200 and answer.json()["replayed"] == 20
    assert answer.json()["job_ids"] == [j["id"] for j in flaky]  # oldest first
    done = [await until_status(api, headers, j["id"], 30) for j in flaky]
    assert {(j["status"], j["attempts"], j["result"]["attempts"]) for j in done} == {("succeeded", 1, 2)}
    events = [e["event"] for e in await trail(api, headers, flaky[0]["id"])]
    assert events[-5:] == ["dead_lettered", "replayed", "queued", "running", "succeeded"]
    assert events.count("running") == 2
    after = (await api.client.get("/api/v1/dlq/stats", headers=api.admin)).json()
    assert (await api.client.get("/api/v1/dlq/stats", headers=headers)).json()["dead_lettered"] == 3
    assert after["broker_depth"] == 23  # until the janitor passes

    # A second copy of a dead job's message (its first reject was lost, or it was published twice) goes too.
    copy = aio_pika.Message(b"{}", message_id=sleepy[1]["id"])
    await broker.channel.default_exchange.publish(copy, routing_key=broker.topology.names.jobs_dlq)
    removed = await janitor_sweep(broker)
    assert removed[broker.topology.names.jobs_dlq] == 21
    assert await dlq_ids(broker) == [j["id"] for j in sleepy]  # the others stay, in order, one message each
    again = await api.client.post("/api/v1/dlq/replay", json={"job_type": "flaky"}, headers=headers)
    assert again.json() == {"replayed": 0, "job_ids": []}  # nothing replayed twice


async def test_replay_by_id_runs_only_that_one(api: Api, worker: JobWorker, db: AsyncEngine) -> None:
    headers = await api.new_client("dlq-id")
    jobs = await dead_jobs(api, headers, 5)
    chosen = jobs[2]["id"]
    answer = await api.client.post("/api/v1/dlq/replay", json={"job_ids": [chosen]}, headers=headers)
    assert answer.json() == {"replayed": 1, "job_ids": [chosen]}
    assert (await until_status(api, headers, chosen, 30))["status"] == "succeeded"
    # A replay moves a job out of dead_lettered in its own transaction: the others, still there, were not sent.
    query = select(JOBS.c.id, JOBS.c.status, JOBS.c.runs).where(JOBS.c.id.in_([j["id"] for j in jobs]))
    async with db.connect() as conn:
        found = {row.id: (row.status, row.runs) for row in await conn.execute(query)}
    assert found == {j["id"]: ("succeeded", 2) if j["id"] == chosen else ("dead_lettered", 1) for j in jobs}
    other = await api.new_client("dlq-id-other")
    stolen = await api.client.post("/api/v1/dlq/replay", json={"job_ids": [jobs[0]["id"]]}, headers=other)
    assert stolen.json() == {"replayed": 0, "job_ids": []}


async def test_a_replay_killed_between_commit_and_publish_is_published_by_the_relay(
    api: Api, db: AsyncEngine, tmp_path: Path
) -> None:
    """An API killed after it committed the first replay, before publishing it: nothing is lost (the relay
    publishes it) and replaying again replays the rest, never that one twice."""
    headers = await api.new_client("dlq-crash")
    with app_process(["worker", "jobs"], settings_env(make_settings()), tmp_path / "w1.log"):
        jobs = await dead_jobs(api, headers, 4)
    port = free_port()
    doomed = settings_env(make_settings(port=port, failpoints="after_replay_commit"))
    with app_process(["api"], doomed, tmp_path / "api.log") as process:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            await until_serving(client)
            with pytest.raises(httpx.TransportError):  # it died before it could answer
                await client.post("/api/v1/dlq/replay", json={"job_type": "flaky"}, headers=headers)
        assert process.popen.wait(10) == -signal.SIGKILL
    statuses = [(await api.job(headers, j["id"]))["status"] for j in jobs]
    assert statuses == ["queued", "dead_lettered", "dead_lettered", "dead_lettered"]  # oldest first, one committed
    again = await api.client.post("/api/v1/dlq/replay", json={"job_type": "flaky"}, headers=headers)
    assert again.json()["job_ids"] == [j["id"] for j in jobs[1:]]
    with app_process(["worker", "jobs"], settings_env(make_settings(outbox_relay_after=0.5)), tmp_path / "w2.log"):
        done = [await until_status(api, headers, j["id"], 30) for j in jobs]
    assert {d["status"] for d in done} == {"succeeded"}
    async with db.connect() as conn:
        runs = set((await conn.execute(select(JOBS.c.runs).where(JOBS.c.id.in_([j["id"] for j in jobs])))).scalars())
    assert runs == {2}  # every job ran exactly once more


async def test_retry_and_cancel_answer_409_when_they_do_not_apply(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("dlq-409")
    ok = (await api.submit(headers)).json()
    await until_status(api, headers, ok["id"])
    not_dead = await api.client.post(f"/api/v1/jobs/{ok['id']}/retry", headers=headers)
    assert (not_dead.status_code, not_dead.json()["code"]) == (409, "not_dead_lettered")
    finished = await api.client.post(f"/api/v1/jobs/{ok['id']}/cancel", headers=headers)
    assert (finished.status_code, finished.json()["code"]) == (409, "not_cancellable")

    dead = (await dead_jobs(api, headers, 1))[0]
    too_late = await api.client.post(f"/api/v1/jobs/{dead['id']}/cancel", headers=headers)
    assert (too_late.status_code, too_late.json()["code"]) == (409, "not_cancellable")
    retried = await api.client.post(f"/api/v1/jobs/{dead['id']}/retry", headers=headers)
    assert retried.status_code == 200 and retried.json()["attempts"] == 0
    assert (await until_status(api, headers, dead["id"], 20))["status"] == "succeeded"
    other = await api.new_client("dlq-409-other")
    assert (await api.client.post(f"/api/v1/jobs/{dead['id']}/retry", headers=other)).status_code == 404


async def test_stats_carry_broker_depth_for_an_admin_only(api: Api, broker: BrokerProbe) -> None:
    dlq = broker.topology.names.jobs_dlq
    await broker.purge(dlq)
    for n in range(3):  # three messages in the broker's DLQ, so the admin's depth is a known non-zero number
        await broker.channel.default_exchange.publish(aio_pika.Message(b"{}", message_id=f"stats-{n}"), dlq)
    try:

        async def three_in_dlq() -> bool:
            return await broker.depth(dlq) == 3

        await wait_for(three_in_dlq)
        headers = await api.new_client("dlq-stats")
        mine = await api.client.get("/api/v1/dlq/stats", headers=headers)
        assert mine.status_code == 200
        assert mine.json() == {"dead_lettered": 0, "by_job_type": {}, "by_reason": {}}  # absent, not null
        admin = await api.client.get("/api/v1/dlq/stats", headers=api.admin)
        assert admin.status_code == 200
        assert type(admin.json()["broker_depth"]) is int and admin.json()["broker_depth"] == 3
        assert set(admin.json()) == {"dead_lettered", "by_job_type", "by_reason", "broker_depth"}
    finally:
        await broker.purge(dlq)
    schema = (await api.client.get("/openapi.json")).json()["components"]["schemas"]["DlqStats"]
    assert schema["properties"]["broker_depth"]["type"] == "integer"  # documented as an integer, never null
    assert "broker_depth" not in schema["required"]


@pytest.mark.parametrize("settings", [make_settings(job_consumers_default=1)])  # one consumer: first in, first out
async def test_a_job_cancelled_before_it_runs_never_runs(
    api: Api, worker: JobWorker, db: AsyncEngine, broker: BrokerProbe
) -> None:
    headers = await api.new_client("dlq-cancel")
    await worker.stop(grace=1)
    job = (await api.submit(headers, job_type="sleep", payload={"seconds": 0.1})).json()
    await until_status(api, headers, job["id"], 5, "queued")
    cancelled = await api.client.post(f"/api/v1/jobs/{job['id']}/cancel", headers=headers)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    dropped: list[str] = []
    sink = logger.add(lambda line: dropped.append(str(line)), level="INFO", filter="app.workers.jobs.worker")
    try:
        await worker.start()
        sentinel = (await api.submit(headers)).json()  # queued behind it in the same lane
        await until_status(api, headers, sentinel["id"])
    finally:
        logger.remove(sink)
    # Its message was taken before the sentinel's, and dropped: none of it is left to run later.
    assert any(f"dropping message for job {job['id']}" in line for line in dropped), dropped
    assert await broker.depth(broker.topology.names.lane_queue(Lane.DEFAULT)) == 0
    assert (await _row(db, job["id"]))["runs"] == 0
    assert [e["event"] for e in await trail(api, headers, job["id"])] == ["created", "queued", "cancelled"]


@pytest.mark.slow
async def test_cancel_racing_with_ten_consumers_never_both(api: Api, db: AsyncEngine, tmp_path: Path) -> None:
    headers = await api.new_client("dlq-race")
    env = settings_env(make_settings(job_consumers_default=10))
    with app_process(["worker", "jobs"], env, tmp_path / "w.log"):
        jobs = []
        cancels = []
        for _ in range(200):
            job = (await api.submit(headers, job_type="sleep", payload={"seconds": 0.01})).json()
            jobs.append(job["id"])
            cancels.append(asyncio.create_task(api.client.post(f"/api/v1/jobs/{job['id']}/cancel", headers=headers)))
        answers = await asyncio.gather(*cancels)
        finals = [await until_status(api, headers, job_id, 30) for job_id in jobs]
    async with db.connect() as conn:
        rows = (await conn.execute(select(JOBS.c.id, JOBS.c.status, JOBS.c.runs).where(JOBS.c.id.in_(jobs)))).all()
        query = select(JOB_EVENTS.c.job_id, JOB_EVENTS.c.event, JOB_EVENTS.c.detail).where(
            JOB_EVENTS.c.job_id.in_(jobs)
        )
        events: dict[str, list[tuple[str, str | None]]] = {job_id: [] for job_id in jobs}
        for job_id, event, detail in await conn.execute(query.order_by(JOB_EVENTS.c.id)):
            events[job_id].append((event, detail.get("from")))
    by_id = {row.id: row for row in rows}
    for job_id, answer in zip(jobs, answers, strict=True):
        row, trail_of = by_id[job_id], events[job_id]
        ran = any(event == "running" for event, _ in trail_of)
        ends = [(event, source) for event, source in trail_of if event in ("cancelled", "succeeded")]
        assert len(ends) == 1, trail_of  # one terminal status, whoever won
        if answer.status_code == 200:  # cancelled before it ran
            assert (row.status, row.runs, ran) == ("cancelled", 0, False)
        elif answer.status_code == 202:  # cancelled as it ran, or it finished first and kept its outcome
            assert row.runs == 1 and ran and ends[0] in (("cancelled", "running"), ("succeeded", "running"))
        else:  # finished before the cancel
            assert (answer.status_code, row.status, ends[0][0]) == (409, "succeeded", "succeeded")
    assert {f["status"] for f in finals} <= {"cancelled", "succeeded"}


async def _row(db: AsyncEngine, job_id: str) -> dict[str, Any]:
    async with db.connect() as conn:
        row = (await conn.execute(select(JOBS).where(JOBS.c.id == job_id))).one()
    return dict(row._mapping)


@pytest.mark.parametrize("body", [{"job_ids": ["a\u0000b"]}, {"job_type": "flaky\u0000"}], ids=["id", "type"])
async def test_a_replay_naming_text_with_a_nul_replays_nothing(api: Api, body: dict[str, Any]) -> None:
    """No job's id or type holds a NUL (PostgreSQL's text cannot): such a request matches nothing, as any unknown
    id does, rather than being refused as text the database cannot store."""
    answer = await api.client.post("/api/v1/dlq/replay", json=body, headers=await api.new_client("dlq-nul"))
    assert (answer.status_code, answer.json()) == (200, {"replayed": 0, "job_ids": []})
