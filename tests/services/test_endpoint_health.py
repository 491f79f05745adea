"""Webhook endpoint health: isolation of a dead endpoint, the breaker, Retry-After, auto-disable, retention."""

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response

from app.models.tables import ATTEMPTS, DELIVERIES, JOB_EVENTS, JOBS
from app.services.upkeep.retention import Retention
from app.stores.artifacts.sql import SqlArtifacts
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import REDIS_URL, make_settings, start_worker
from tests.receiver import Received, Receiver
from tests.support import Api, make_delivery, make_job, until_status, wait_for


async def register(api: Api, headers: dict[str, str], url: str) -> dict[str, Any]:
    answer = await api.client.post("/api/v1/webhooks", json={"url": url, "events": ["job.succeeded"]}, headers=headers)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def count_at_least(receiver: Receiver, path: str, n: int, within: float = 20) -> list[Received]:
    async def enough() -> list[Received] | None:
        got = receiver.on(path)
        return got if len(got) >= n else None

    result = await wait_for(enough, within=within)
    assert result is not None
    return result


async def test_a_dead_endpoint_does_not_slow_a_healthy_one(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    settings = make_settings(
        webhook_consumers=3,
        webhook_max_in_flight_per_endpoint=1,
        webhook_breaker_failures=3,
        webhook_breaker_cooldown_seconds=5,
        webhook_timeout_seconds=1,
    )
    receiver.delays["/dead"] = 5  # never answers within the timeout
    headers = await api.new_client("health-isolation")
    await register(api, headers, receiver.url("/dead"))
    await register(api, headers, receiver.url("/healthy"))
    async with start_worker(WebhookWorker, settings):
        jobs = [(await api.submit(headers, payload={"n": n})).json() for n in range(50)]
        got = await count_at_least(receiver, "/healthy", 50, within=60)
        finished = {j["id"]: await until_status(api, headers, j["id"]) for j in jobs}
    lags = []
    for request in got:
        job = _job_of(request)
        done_at = datetime.fromisoformat(finished[job]["finished_at"]).timestamp()
        lags.append(request.at - done_at)
    assert len({_job_of(r) for r in got}) == 50
    assert max(lags) < 3, sorted(lags)[-5:]  # each within a few seconds of its job finishing
    # The dead endpoint held at most one consumer at a time and, once its breaker opened, none.
    assert len(receiver.on("/dead")) < 10


async def test_the_breaker_opens_skips_probes_and_closes(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    settings = make_settings(
        webhook_breaker_failures=2, webhook_breaker_cooldown_seconds=1.5, webhook_retry_schedule="0.2,0.2,0.2,0.2,0.2"
    )
    receiver.answer = lambda _: Response(status_code=500)
    headers = await api.new_client("health-breaker")
    endpoint = await register(api, headers, receiver.url("/flappy"))
    redis = Redis.from_url(REDIS_URL)
    breaker_key = f"{settings.namespace}:webhook:breaker:{endpoint['id']}"
    try:
        async with start_worker(WebhookWorker, settings):
            job = (await api.submit(headers)).json()
            failures = await count_at_least(receiver, "/flappy", 2)
            assert await redis.hget(breaker_key, "opened_at") is not None  # open
            receiver.answer = None  # healthy again; the breaker still holds deliveries back until it probes
            [*_, probe] = await count_at_least(receiver, "/flappy", 3)

            async def succeeded() -> list[dict[str, Any]] | None:
                logs = (await api.client.get(f"/api/v1/jobs/{job['id']}/logs", headers=headers)).json()
                return logs if logs and logs[0]["status"] == "succeeded" else None

            logs = await wait_for(succeeded)
            assert logs is not None
        assert probe.at - failures[1].at >= 1.4  # nothing was sent while open, though the schedule said 0.2 s
        assert [a["status_code"] for a in logs[0]["attempts"]] == [500, 500, 200]  # skips are not attempts
        assert await redis.exists(breaker_key) == 0  # closed
    finally:
        await redis.aclose()


async def test_gone_disables_at_once(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    receiver.answer = lambda got: Response(status_code=410 if got.path == "/gone" else 200)
    headers = await api.new_client("health-gone")
    endpoint = await register(api, headers, receiver.url("/gone"))
    still_on = await register(api, headers, receiver.url("/still-on"))
    async with start_worker(WebhookWorker, make_settings()):
        job = (await api.submit(headers)).json()
        await count_at_least(receiver, "/gone", 1)

        async def disabled() -> dict[str, Any] | None:
            shown = (await api.client.get(f"/api/v1/webhooks/{endpoint['id']}", headers=headers)).json()
            return shown if shown["active"] is False else None

        shown = await wait_for(disabled)
        assert shown is not None and "410" in shown["disabled_reason"]
        logs = (await api.client.get(f"/api/v1/jobs/{job['id']}/logs", headers=headers)).json()
        gone = [d for d in logs if d["webhook_id"] == endpoint["id"]]
        assert [(d["status"], len(d["attempts"])) for d in gone] == [("failed", 1)]
        later = (await api.submit(headers)).json()
        await count_at_least(receiver, "/still-on", 2)  # the later event was fanned out, to the live endpoint only

        async def later_delivered() -> list[dict[str, Any]] | None:
            logs = (await api.client.get(f"/api/v1/jobs/{later['id']}/logs", headers=headers)).json()
            return logs or None

        later_logs = await wait_for(later_delivered)
    assert [d["webhook_id"] for d in later_logs] == [still_on["id"]]  # no delivery exists that could reach /gone
    assert len(receiver.on("/gone")) == 1


async def test_an_endpoint_failing_for_the_period_is_disabled_and_can_be_enabled(
    api: Api, worker: JobWorker, receiver: Receiver
) -> None:
    settings = make_settings(
        webhook_disable_after_seconds=1, webhook_breaker_failures=100, webhook_retry_schedule="0.4,0.4,0.4,0.4,0.4,0.4"
    )
    receiver.answer = lambda _: Response(status_code=500)
    headers = await api.new_client("health-period")
    endpoint = await register(api, headers, receiver.url("/broken"))
    async with start_worker(WebhookWorker, settings):
        await api.submit(headers)

        async def disabled() -> dict[str, Any] | None:
            shown = (await api.client.get(f"/api/v1/webhooks/{endpoint['id']}", headers=headers)).json()
            return shown if shown["active"] is False else None

        shown = await wait_for(disabled, within=20)
    assert shown is not None and shown["disabled_reason"].startswith("every attempt failed from")
    assert 2 <= len(receiver.on("/broken")) <= 6
    enabled = await api.client.patch(f"/api/v1/webhooks/{endpoint['id']}", json={"active": True}, headers=headers)
    assert (enabled.json()["active"], enabled.json()["disabled_reason"]) == (True, None)


async def test_retry_after_on_503_is_honoured(api: Api, worker: JobWorker, receiver: Receiver) -> None:
    settings = make_settings(webhook_retry_schedule="1.5,1.5")

    def busy_once(request: Received) -> Response:
        if len(receiver.on("/busy")) == 1:
            return Response(status_code=503, headers={"Retry-After": "2"})
        return Response(status_code=200)

    receiver.answer = busy_once
    headers = await api.new_client("health-retry-after")
    await register(api, headers, receiver.url("/busy"))
    async with start_worker(WebhookWorker, settings):
        await api.submit(headers)
        first, second = await count_at_least(receiver, "/busy", 2)
    assert second.at - first.at >= 2.0
    assert second.headers["webhook-id"] == first.headers["webhook-id"]


async def test_retention_deletes_old_rows_in_batches_and_keeps_young_ones(db: AsyncEngine) -> None:
    now = datetime.now(UTC)
    old, young = now - timedelta(days=40), now - timedelta(days=1)
    client = f"retention-{uuid.uuid4().hex[:8]}"
    jobs = {"old": [str(uuid.uuid4()) for _ in range(3)], "young": [str(uuid.uuid4())], "running": [str(uuid.uuid4())]}
    async with db.begin() as conn:
        for kind, ids in jobs.items():
            for job_id in ids:
                at = young if kind == "young" else old
                status = "running" if kind == "running" else "succeeded"
                finished = at if status == "succeeded" else None
                row = make_job(at, id=job_id, client_id=client, status=status, finished_at=finished)
                await conn.execute(insert(JOBS).values(**row))
                for event in ("created", "queued", "running"):
                    await conn.execute(insert(JOB_EVENTS).values(job_id=job_id, event=event, detail={}, created_at=at))
                delivery_id = f"msg_{job_id.replace('-', '')}"
                await conn.execute(insert(DELIVERIES).values(**make_delivery(delivery_id, job_id, client, at)))
                for n in (1, 2):
                    await conn.execute(
                        insert(ATTEMPTS).values(
                            delivery_id=delivery_id, attempt=n, status_code=500, duration_ms=1.0, created_at=at
                        )
                    )
    sweep = await Retention(db, delivery_days=30, job_days=30, batch_size=2, artifact_rows=SqlArtifacts(db)).sweep(now)
    assert sweep.deleted["delivery_attempts"] >= 8  # 4 old deliveries x 2 attempts (other tests' rows are young)
    assert sweep.deleted["job_events"] >= 9  # 3 old finished jobs x 3 events; the running job keeps its trail
    assert sweep.batches >= 4 + 2 + 5  # at most 2 rows per delete
    async with db.connect() as conn:
        events = dict(
            (
                await conn.execute(
                    select(JOB_EVENTS.c.job_id, func.count())
                    .where(JOB_EVENTS.c.job_id.in_([i for ids in jobs.values() for i in ids]))
                    .group_by(JOB_EVENTS.c.job_id)
                )
            ).all()
        )
        deliveries = set(
            (await conn.execute(select(DELIVERIES.c.job_id).where(DELIVERIES.c.client_id == client))).scalars()
        )
    assert events == {jobs["young"][0]: 3, jobs["running"][0]: 3}
    assert deliveries == {jobs["young"][0]}


def _job_of(request: Received) -> str:
    job_id: str = json.loads(request.body)["data"]["job"]["id"]
    return job_id
