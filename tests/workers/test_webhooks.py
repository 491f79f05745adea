"""Webhook endpoints and signed deliveries, end to end: API, job worker, webhook worker and a real receiver."""

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.core.broker import Broker
from app.core.messages import events_of
from app.models.tables import CLIENT_SECRETS, ENDPOINTS
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.conftest import RABBITMQ_URL
from tests.receiver import Received, Receiver
from tests.support import Api, BrokerProbe, trail, until_status, wait_for


def verify(secret_key: str, raw_body: bytes, signature: str) -> bool:
    # Seed 002's receiver snippet, verbatim.
    expected = hmac.new(secret_key.encode(), raw_body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def verify_standard(secret: str, request: Received) -> dict[str, Any]:
    payload: dict[str, Any] = Webhook(secret).verify(request.body, request.headers)
    return payload


async def register(
    api: Api, headers: dict[str, str], receiver: Receiver, path: str = "/hook", **body: Any
) -> dict[str, Any]:
    answer = await api.client.post("/api/v1/webhooks", json={"url": receiver.url(path), **body}, headers=headers)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def arrived(receiver: Receiver, path: str, count: int, within: float = 15) -> list[Received]:
    async def enough() -> list[Received] | None:
        got = receiver.on(path)
        return got if len(got) >= count else None

    result = await wait_for(enough, within=within)
    assert result is not None
    return result


async def delivered(
    api: Api, headers: dict[str, str], job_id: str, status: str, within: float = 15
) -> list[dict[str, Any]]:
    async def settled() -> list[dict[str, Any]] | None:
        logs = (await api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers)).json()
        return logs if logs and all(d["status"] == status for d in logs) else None

    result = await wait_for(settled, within=within)
    assert result is not None
    return result


async def test_a_finished_job_is_delivered_signed_and_logged(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    headers = {**await api.new_client("hooks-basic"), "X-Request-ID": "req-hook-1"}
    endpoint = await register(api, headers, receiver, events=["job.succeeded"])
    assert endpoint["secret"].startswith("whsec_") and endpoint["active"] is True
    job = (await api.submit(headers, payload={"deliver": "me"})).json()
    [request] = await arrived(receiver, "/hook", 1)

    payload = verify_standard(endpoint["secret"], request)
    assert payload["type"] == "job.succeeded"
    assert payload["data"]["job"]["id"] == job["id"] and payload["data"]["job"]["result"] == {"deliver": "me"}
    assert payload["seq"] == 3 and payload["id"].startswith("evt_")
    assert verify(endpoint["secret"], request.body, request.headers["x-task-queue-signature"])
    assert request.headers["webhook-id"].startswith("msg_") and "." not in request.headers["webhook-id"]
    assert request.headers["x-request-id"] == "req-hook-1"
    assert request.headers["content-type"] == "application/json"
    assert abs(int(request.headers["webhook-timestamp"]) - datetime.now(UTC).timestamp()) < 30
    assert abs(int(request.headers["x-task-queue-timestamp"]) - datetime.now(UTC).timestamp()) < 30

    tampered = request.body.replace(b"deliver", b"DELIVER")
    with pytest.raises(WebhookVerificationError):
        Webhook(endpoint["secret"]).verify(tampered, request.headers)
    assert not verify(endpoint["secret"], tampered, request.headers["x-task-queue-signature"])

    [log] = await delivered(api, headers, job["id"], "succeeded")
    assert log["id"] == request.headers["webhook-id"] and log["webhook_id"] == endpoint["id"]
    assert log["event_type"] == "job.succeeded" and log["url"] == receiver.url()
    assert [(a["attempt"], a["status_code"], a["response_body"]) for a in log["attempts"]] == [(1, 200, "ok")]
    deliveries = [e for e in await trail(api, headers, job["id"]) if e["event"] == "delivery"]
    assert [(d["detail"]["outcome"], d["detail"]["status_code"]) for d in deliveries] == [("succeeded", 200)]
    shown = (await api.client.get(f"/api/v1/webhooks/{endpoint['id']}", headers=headers)).json()
    assert "secret" not in shown and shown["url"] == receiver.url()


async def test_failures_retry_with_one_webhook_id_then_fail_into_the_dlq_and_can_be_sent_again(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver, broker: BrokerProbe
) -> None:
    dlq = broker.topology.names.webhooks_dlq
    await broker.purge(dlq)
    headers = await api.new_client("hooks-retry")
    flaky_then_ok = await register(api, headers, receiver, "/eventually", events=["job.succeeded"])
    always_down = await register(api, headers, receiver, "/down", events=["job.succeeded"])

    def answer(request: Received) -> Any:
        from starlette.responses import Response

        if request.path == "/down":
            return Response(status_code=500, content=b"x" * 10_000)
        return Response(status_code=500 if len(receiver.on("/eventually")) <= 2 else 200, content=b"ok")

    receiver.answer = answer
    job = (await api.submit(headers)).json()
    got = await arrived(receiver, "/eventually", 3)
    assert len({r.headers["webhook-id"] for r in got}) == 1
    await arrived(receiver, "/down", 3)

    logs = {d["webhook_id"]: d for d in await _logs_when_settled(api, headers, job["id"])}
    assert logs[flaky_then_ok["id"]]["status"] == "succeeded"
    assert [a["status_code"] for a in logs[flaky_then_ok["id"]]["attempts"]] == [500, 500, 200]
    down = logs[always_down["id"]]
    assert down["status"] == "failed" and [a["attempt"] for a in down["attempts"]] == [1, 2, 3]
    assert all(len(a["response_body"]) == 4096 for a in down["attempts"])  # stored only up to 4 KiB
    assert down["attempts"][0]["next_attempt_at"] is not None and down["attempts"][-1]["next_attempt_at"] is None

    assert (await broker.until_taken(dlq, down["id"])).count(down["id"]) == 1

    receiver.answer = None  # fixed: 200 from now on
    answer_ = await api.client.post(f"/api/v1/deliveries/{down['id']}/redeliver", headers=headers)
    assert answer_.status_code == 202
    fixed = await arrived(receiver, "/down", 4)
    assert fixed[-1].headers["webhook-id"] == down["id"]
    await wait_for(lambda: _status_of(api, headers, job["id"], down["id"], "succeeded"))

    other = await api.new_client("hooks-retry-other")
    assert (await api.client.post(f"/api/v1/deliveries/{down['id']}/redeliver", headers=other)).status_code == 404


async def test_recover_sends_every_failed_delivery_since_a_time(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("hooks-recover")
    endpoint = await register(api, headers, receiver, "/recover", events=["job.succeeded"])
    receiver.answer = lambda _: __import__("starlette.responses").responses.Response(status_code=503)
    since = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    jobs = [(await api.submit(headers, payload={"n": n})).json() for n in range(2)]
    for job in jobs:
        await delivered(api, headers, job["id"], "failed")
    receiver.answer = None
    before = len(receiver.on("/recover"))
    answer = await api.client.post(f"/api/v1/webhooks/{endpoint['id']}/recover", json={"since": since}, headers=headers)
    assert answer.status_code == 202 and answer.json()["recovered"] == 2
    got = await arrived(receiver, "/recover", before + 2)
    assert {r.headers["webhook-id"] for r in got[before:]} == set(answer.json()["delivery_ids"])
    for job in jobs:
        await delivered(api, headers, job["id"], "succeeded")


async def test_rotation_signs_with_both_secrets_and_delete_stops_deliveries(
    api: Api,
    worker: JobWorker,
    webhook_worker: WebhookWorker,
    receiver: Receiver,
    db: AsyncEngine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    headers = await api.new_client("hooks-rotate")
    endpoint = await register(api, headers, receiver, "/rotate", events=["job.succeeded"])
    rotated = await api.client.post(f"/api/v1/webhooks/{endpoint['id']}/rotate-secret", headers=headers)
    new_secret = rotated.json()["secret"]
    assert new_secret.startswith("whsec_") and new_secret != endpoint["secret"]
    await api.submit(headers)
    [request] = await arrived(receiver, "/rotate", 1)
    signatures = request.headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
    verify_standard(new_secret, request)
    verify_standard(endpoint["secret"], request)
    assert verify(new_secret, request.body, request.headers["x-task-queue-signature"])

    async with db.connect() as conn:
        stored = (await conn.execute(select(ENDPOINTS).where(ENDPOINTS.c.id == endpoint["id"]))).one()
        dump = json.dumps([str(v) for v in stored])
    for secret in (endpoint["secret"], new_secret):
        assert secret not in dump and secret.removeprefix("whsec_") not in dump
        assert secret not in caplog.text

    assert (await api.client.delete(f"/api/v1/webhooks/{endpoint['id']}", headers=headers)).status_code == 204
    assert (await api.client.get(f"/api/v1/webhooks/{endpoint['id']}", headers=headers)).status_code == 404
    kept = await register(api, headers, receiver, "/kept", events=["job.succeeded"])
    job = (await api.submit(headers)).json()
    # Its event was fanned out (one transaction for every target): to the endpoint still there, not the deleted one.
    logs = await delivered(api, headers, job["id"], "succeeded")
    assert [d["webhook_id"] for d in logs] == [kept["id"]]
    assert len(receiver.on("/kept")) == 1 and len(receiver.on("/rotate")) == 1


async def test_filters_by_event_type_job_type_and_job_id_and_the_callback_url(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver, db: AsyncEngine
) -> None:
    headers = await api.new_client("hooks-filter")
    await register(api, headers, receiver, "/dead-only", events=["job.dead_lettered"])
    await register(api, headers, receiver, "/sleep-only", events=["job.succeeded"], job_type="sleep")
    slow = (await api.submit(headers, job_type="sleep", payload={"seconds": 1})).json()
    await register(api, headers, receiver, "/one-job", job_id=slow["id"])  # while it still runs
    ok = (await api.submit(headers, payload={"a": 1}, callback_url=receiver.url("/callback"))).json()
    dead = (await api.submit(headers, job_type="flaky", payload={"permanent": True}, max_retries=0)).json()
    slept = (await api.submit(headers, job_type="sleep", payload={"seconds": 0.01})).json()
    for job in (slow, ok, dead, slept):
        await until_status(api, headers, job["id"])
    await arrived(receiver, "/dead-only", 1)
    await arrived(receiver, "/sleep-only", 2)
    await arrived(receiver, "/one-job", 1)
    callback = await arrived(receiver, "/callback", 1)
    # Each job has one subscribable event, fanned out in one transaction: its deliveries are all it will ever get.
    expected = {
        slow["id"]: ["/one-job", "/sleep-only"],
        ok["id"]: ["/callback"],
        dead["id"]: ["/dead-only"],
        slept["id"]: ["/sleep-only"],
    }
    for job_id, paths in expected.items():
        logs = await delivered(api, headers, job_id, "succeeded")
        assert sorted(d["url"].rsplit("/", 1)[-1] for d in logs) == [p.lstrip("/") for p in paths], job_id

    def job_ids(path: str) -> list[str]:
        return sorted(json.loads(r.body)["data"]["job"]["id"] for r in receiver.on(path))

    assert job_ids("/dead-only") == [dead["id"]]
    assert job_ids("/sleep-only") == sorted([slept["id"], slow["id"]])
    assert job_ids("/one-job") == [slow["id"]]
    assert len(receiver.on("/callback")) == 1
    body = json.loads(callback[0].body)
    assert (body["type"], body["data"]["job"]["id"]) == ("job.succeeded", ok["id"])
    secret = (await api.client.get("/api/v1/webhooks/default-secret", headers=headers)).json()["secret"]
    verify_standard(secret, callback[0])
    assert verify(secret, callback[0].body, callback[0].headers["x-task-queue-signature"])
    async with db.connect() as conn:
        sealed = (
            await conn.execute(select(CLIENT_SECRETS.c.secret).where(CLIENT_SECRETS.c.client_id == "hooks-filter"))
        ).scalar_one()
    assert secret not in sealed


async def test_an_event_published_twice_makes_one_delivery(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver, broker: BrokerProbe
) -> None:
    headers = await api.new_client("hooks-twice")
    await register(api, headers, receiver, "/twice", events=["job.succeeded"])
    events_queue = broker.topology.names.webhook_events_queue
    await webhook_worker.fanout.stop(grace=1)  # hold events back so we can copy one
    try:
        job = (await api.submit(headers)).json()
        await until_status(api, headers, job["id"])

        async def its_success() -> tuple[Any, bytes] | None:
            # The job's own success, alone or in a bundle: other tests' jobs may still be publishing events.
            for message in await broker.take_all(events_queue):
                for body in events_of(message.body):
                    found = json.loads(body)
                    if found["type"] == "job.succeeded" and found["data"]["job"]["id"] == job["id"]:
                        return message, body
            return None

        event, body = await wait_for(its_success)
    finally:
        await webhook_worker.fanout.start()
    publisher = Broker(RABBITMQ_URL, broker.topology, 2, name="test-twice")
    await publisher.start(wait=10)
    try:
        from app.core.broker import Outgoing

        names = broker.topology.names
        for _ in range(2):
            copy = Outgoing(
                names.events_exchange,
                event.routing_key or "",
                body,
                dict(event.headers),
                message_id=json.loads(body)["id"],
            )
            await publisher.publish(copy)
        # A later event behind both copies, through the one fan-out consumer: once it is delivered, so would a
        # second delivery of the copied event have been.
        later = (await api.submit(headers)).json()
        await delivered(api, headers, later["id"], "succeeded")
    finally:
        await publisher.close()
    got = await arrived(receiver, "/twice", 2)
    assert sorted(json.loads(r.body)["data"]["job"]["id"] for r in got) == sorted([job["id"], later["id"]])
    logs = await delivered(api, headers, job["id"], "succeeded")
    assert len(logs) == 1 and len(logs[0]["attempts"]) == 1


async def test_test_ping_and_validation(api: Api, webhook_worker: WebhookWorker, receiver: Receiver) -> None:
    headers = await api.new_client("hooks-ping")
    endpoint = await register(api, headers, receiver, "/ping")
    assert set(endpoint["events"]) == {"job.succeeded", "job.dead_lettered", "job.retrying", "job.cancelled"}
    answer = await api.client.post(f"/api/v1/webhooks/{endpoint['id']}/test", headers=headers)
    assert answer.status_code == 202
    [ping] = await arrived(receiver, "/ping", 1)
    body = verify_standard(endpoint["secret"], ping)
    assert body["type"] == "webhook.test" and body["data"] == {"webhook_id": endpoint["id"]}
    assert ping.headers["webhook-id"] == answer.json()["delivery_id"]
    deliveries = (await api.client.get(f"/api/v1/webhooks/{endpoint['id']}/deliveries", headers=headers)).json()
    assert [(d["event_type"], d["job_id"]) for d in deliveries] == [("webhook.test", None)]
    cases = [
        {"url": receiver.url(), "events": ["job.exploded"]},
        {"url": "ftp://example.com/x"},
        {"url": receiver.url(), "job_type": "nope"},
        {"url": receiver.url(), "events": []},
    ]
    for body in cases:
        assert (await api.client.post("/api/v1/webhooks", json=body, headers=headers)).status_code == 422, body
    other = await api.new_client("hooks-ping-other")
    assert (await api.client.get(f"/api/v1/webhooks/{endpoint['id']}", headers=other)).status_code == 404
    assert (await api.client.post(f"/api/v1/webhooks/{endpoint['id']}/test", headers=other)).status_code == 404
    patched = await api.client.patch(
        f"/api/v1/webhooks/{endpoint['id']}", json={"active": False, "description": "paused"}, headers=headers
    )
    assert (patched.json()["active"], patched.json()["description"]) == (False, "paused")


async def _logs_when_settled(api: Api, headers: dict[str, str], job_id: str) -> list[dict[str, Any]]:
    async def settled() -> list[dict[str, Any]] | None:
        logs = (await api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers)).json()
        return logs if logs and all(d["status"] != "pending" for d in logs) else None

    result = await wait_for(settled, within=20)
    assert result is not None
    return result


async def _status_of(api: Api, headers: dict[str, str], job_id: str, delivery_id: str, status: str) -> bool:
    logs = (await api.client.get(f"/api/v1/jobs/{job_id}/logs", headers=headers)).json()
    return any(d["id"] == delivery_id and d["status"] == status for d in logs)
