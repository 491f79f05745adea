"""An operator's action goes out at once, even through an open circuit: redeliver, recover and re-enabling an
endpoint are sent now (the action is the probe) and their success closes the circuit (issue 13, item 6)."""

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response

from app.models.tables import DELIVERIES
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import make_settings, start_worker
from tests.receiver import Receiver, serving
from tests.support import Api, until_status, wait_for

# A long cooldown and long retries: without the operator's action nothing would be sent again within the test.
SETTINGS = {"webhook_breaker_failures": 1, "webhook_breaker_cooldown_seconds": 60, "webhook_retry_schedule": "30,30"}


async def broken_endpoint(api: Api, receiver: Receiver, redis: Redis, client: str) -> tuple[dict[str, str], Any]:
    """An endpoint whose circuit is open after one failed delivery of a finished job; the receiver then heals."""
    receiver.answer = lambda _: Response(status_code=500)
    headers = await api.new_client(client)
    body = {"url": receiver.url(f"/{client}"), "events": ["job.succeeded"]}
    endpoint = (await api.client.post("/api/v1/webhooks", json=body, headers=headers)).json()
    job = (await api.submit(headers)).json()
    await until_status(api, headers, job["id"])
    breaker = f"{make_settings().namespace}:webhook:breaker:{endpoint['id']}"

    async def opened() -> bool:
        return await redis.hget(breaker, "opened_at") is not None

    await wait_for(opened, within=20)

    async def logged() -> bool:  # the circuit opens beside the attempt's record: wait for the record too
        return [len(d["attempts"]) for d in await logs(api, headers, job["id"])] == [1]

    await wait_for(logged, within=10)
    receiver.answer = None  # fixed: answers 200 from now on
    return headers, (endpoint, job, breaker)


async def delivered(receiver: Receiver, path: str, count: int) -> None:
    """The receiver got `count` requests, within 10 s: long before the 30 s retry or the 60 s cooldown."""

    async def arrived() -> bool:
        return len(receiver.on(path)) >= count

    await wait_for(arrived, within=10)


async def logs(api: Api, headers: dict[str, str], job_id: str) -> list[dict[str, Any]]:
    answer = await api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers)
    result: list[dict[str, Any]] = answer.json()
    return result


async def test_a_redelivery_goes_out_through_an_open_circuit_and_closes_it(
    api: Api, worker: JobWorker, receiver: Receiver, redis: Redis
) -> None:
    async with start_worker(WebhookWorker, make_settings(**SETTINGS)):
        headers, (_, job, breaker) = await broken_endpoint(api, receiver, redis, "op-redeliver")
        [delivery] = await logs(api, headers, job["id"])
        answer = await api.client.post(f"/api/v1/deliveries/{delivery['id']}/redeliver", headers=headers)
        assert answer.status_code in (200, 202), answer.text
        await delivered(receiver, "/op-redeliver", 2)
        await circuit_closed(redis, breaker)  # the operator's success closed the circuit
        [after] = await logs(api, headers, job["id"])
        assert [a["status_code"] for a in after["attempts"]][-1] == 200


async def test_a_redelivery_that_finds_an_attempt_in_flight_waits_for_it_as_the_operators_and_goes_out(
    api: Api, worker: JobWorker, receiver: Receiver, redis: Redis, db: AsyncEngine
) -> None:
    """The operator's message finds the delivery leased (another worker's attempt in flight): it comes back as
    soon as a delay tier allows, still the operator's, and goes out through the open circuit once the lease ends.
    (It used to wait for the tier past the lease, 30 s here, and come back as an ordinary message, held by the
    circuit for its 60 s cooldown.)"""
    async with start_worker(WebhookWorker, make_settings(**{**SETTINGS, "webhook_retry_schedule": "0.5,30"})):
        headers, (_, job, breaker) = await broken_endpoint(api, receiver, redis, "op-in-flight")
        [delivery] = await logs(api, headers, job["id"])
        in_flight = datetime.now(UTC) + timedelta(seconds=2)
        async with db.begin() as conn:
            await conn.execute(
                update(DELIVERIES).where(DELIVERIES.c.id == delivery["id"]).values(lease_until=in_flight)
            )
        answer = await api.client.post(f"/api/v1/deliveries/{delivery['id']}/redeliver", headers=headers)
        assert answer.status_code in (200, 202), answer.text
        await delivered(receiver, "/op-in-flight", 2)
        assert time.time() >= in_flight.timestamp()  # not before the lease ended
        await circuit_closed(redis, breaker)


async def test_recover_goes_out_through_an_open_circuit(
    api: Api, worker: JobWorker, receiver: Receiver, redis: Redis
) -> None:
    quick_failure = {**SETTINGS, "webhook_breaker_failures": 100, "webhook_retry_schedule": "0.2"}
    async with start_worker(WebhookWorker, make_settings(**quick_failure)):
        receiver.answer = lambda _: Response(status_code=500)
        headers = await api.new_client("op-recover")
        body = {"url": receiver.url("/op-recover"), "events": ["job.succeeded"]}
        endpoint = (await api.client.post("/api/v1/webhooks", json=body, headers=headers)).json()
        job = (await api.submit(headers)).json()

        async def failed() -> bool:
            return [d["status"] for d in await logs(api, headers, job["id"])] == ["failed"]

        await wait_for(failed, within=20)
        breaker = f"{make_settings().namespace}:webhook:breaker:{endpoint['id']}"
        await redis.hset(breaker, mapping={"opened_at": time.time(), "failures": 100})  # and its circuit open
        receiver.answer = None
        recover = f"/api/v1/webhooks/{endpoint['id']}/recover"
        answer = await api.client.post(recover, json={"since": "2000-01-01T00:00:00+00:00"}, headers=headers)
        assert (answer.status_code, answer.json()["recovered"]) == (202, 1), answer.text
        await delivered(receiver, "/op-recover", 3)
        await circuit_closed(redis, breaker)


async def test_a_recover_of_many_deliveries_keeps_to_the_endpoints_in_flight_cap(
    api: Api, worker: JobWorker, redis: Redis
) -> None:
    """The operator's deliveries go through the open circuit, but no more of them at once than the endpoint's cap:
    a recover must not flood an endpoint that has just come back."""
    jobs, cap = 8, 2
    settings = {
        **SETTINGS,
        "webhook_breaker_failures": 100,
        "webhook_retry_schedule": "0.2",
        "webhook_max_in_flight_per_endpoint": cap,
        "webhook_consumers": jobs,  # a consumer for each delivery: the cap alone holds them back
    }
    async with serving() as server, start_worker(WebhookWorker, make_settings(**settings)):
        receiver = server.receiver
        receiver.answer = lambda _: Response(status_code=500)
        headers = await api.new_client("op-recover-cap")
        body = {"url": server.url("/op-recover-cap"), "events": ["job.succeeded"]}
        endpoint = (await api.client.post("/api/v1/webhooks", json=body, headers=headers)).json()
        submitted = [(await api.submit(headers)).json()["id"] for _ in range(jobs)]

        async def statuses() -> list[list[str]]:
            return [[d["status"] for d in await logs(api, headers, job)] for job in submitted]

        async def all_failed() -> bool:
            return await statuses() == [["failed"]] * jobs

        await wait_for(all_failed, within=30)
        breaker = f"{make_settings().namespace}:webhook:breaker:{endpoint['id']}"
        await redis.hset(breaker, mapping={"opened_at": time.time(), "failures": 100})  # and its circuit open
        receiver.answer, receiver.delay = None, 0.2  # healed, and slow enough for attempts to overlap
        server.most_in_flight = 0
        recover = f"/api/v1/webhooks/{endpoint['id']}/recover"
        answer = await api.client.post(recover, json={"since": "2000-01-01T00:00:00+00:00"}, headers=headers)
        assert (answer.status_code, answer.json()["recovered"]) == (202, jobs), answer.text
        await delivered(receiver, "/op-recover-cap", 3 * jobs)  # two failed attempts each, then the operator's
        assert server.most_in_flight == cap

        async def all_succeeded() -> bool:  # each recorded once its receiver has answered
            return await statuses() == [["succeeded"]] * jobs

        await wait_for(all_succeeded, within=10)


async def test_re_enabling_an_endpoint_sends_its_pending_deliveries_at_once(
    api: Api, worker: JobWorker, receiver: Receiver, redis: Redis
) -> None:
    async with start_worker(WebhookWorker, make_settings(**SETTINGS)):
        headers, (endpoint, job, breaker) = await broken_endpoint(api, receiver, redis, "op-enable")
        path = f"/api/v1/webhooks/{endpoint['id']}"
        assert (await api.client.patch(path, json={"active": False}, headers=headers)).status_code == 200
        assert (await api.client.patch(path, json={"active": True}, headers=headers)).status_code == 200
        await delivered(receiver, "/op-enable", 2)
        await circuit_closed(redis, breaker)
        [delivery] = await logs(api, headers, job["id"])
        assert delivery["status"] == "succeeded"


async def circuit_closed(redis: Redis, breaker: str) -> None:
    """The success is recorded (and the breaker fed) in a batch right after the receiver answered."""

    async def gone() -> bool:
        return await redis.exists(breaker) == 0

    await wait_for(gone, within=5)
