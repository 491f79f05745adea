"""A notification's credentials (its `secret` and its Authorization, Proxy-Authorization, Cookie and X-Api-Key
headers) are sealed at rest and written "***" on every way out; the handler alone sends them."""

import base64
import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook
from starlette.responses import Response

from app.core.masking import MASK
from app.models.tables import JOB_EVENTS, JOBS, SCHEDULES
from app.schemas.payloads.notification import SPEC as NOTIFICATION
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.receiver import Received, Receiver
from tests.support import Api, trail, until_status, wait_for

SECRET = "whsec_" + base64.b64encode(b"payload-secret-" * 2 + b"xx").decode()
CREDENTIALS = {
    "authorization": "Bearer tok-4f1c9a0e77b2d6",  # header names are matched whatever their case
    "Proxy-Authorization": "Basic cHJveHk6c2VjcmV0LXB3",
    "COOKIE": "sid=cookie-5e8d21aa",
    "X-Api-Key": "apikey-90c7e3b1f2",
}
CLEAR = [SECRET, *CREDENTIALS.values()]


def notification(url: str, **extra: Any) -> dict[str, Any]:
    payload = {"url": url, "secret": SECRET, "headers": {**CREDENTIALS, "X-Tenant": "t1"}, "body": {"n": 1}}
    return {"job_type": "notification", "payload": payload, **extra}


def assert_masked(job: dict[str, Any]) -> None:
    assert job["payload"]["secret"] == MASK
    assert job["payload"]["headers"] == {**dict.fromkeys(CREDENTIALS, MASK), "X-Tenant": "t1"}
    assert_clear_of_secrets(json.dumps(job))


def assert_clear_of_secrets(text: str) -> None:
    for value in CLEAR:
        assert value not in text
        assert value.removeprefix("whsec_") not in text


def test_the_payload_is_split_into_what_shows_and_what_is_sealed() -> None:
    assert NOTIFICATION.credentials is not None
    payload = notification("http://127.0.0.1/x")["payload"]
    shown, hidden = NOTIFICATION.credentials(payload)
    assert shown == {**payload, "secret": MASK, "headers": {**dict.fromkeys(CREDENTIALS, MASK), "X-Tenant": "t1"}}
    assert hidden == {"secret": SECRET, "headers": CREDENTIALS}
    assert NOTIFICATION.credentials({"url": "http://127.0.0.1/x", "headers": {"X-Tenant": "t"}})[1] == {}
    url = "http://127.0.0.1/x?access_token=url-tok-1&page=2"
    shown, hidden = NOTIFICATION.credentials({"url": url})
    assert (shown, hidden) == ({"url": "http://127.0.0.1/x?access_token=***&page=2"}, {"url": url})


async def test_credentials_are_sealed_at_rest_and_masked_everywhere(
    api: Api, worker: JobWorker, webhook_worker: WebhookWorker, receiver: Receiver, db: AsyncEngine
) -> None:
    headers = await api.new_client("payload-secrets")
    hook = await api.client.post(
        "/api/v1/webhooks",
        json={"url": receiver.url("/events"), "events": ["job.retrying", "job.dead_lettered"]},
        headers=headers,
    )
    assert hook.status_code == 201, hook.text
    receiver.answer = lambda request: Response(status_code=503 if request.path == "/deny" else 200)

    answer = await api.client.post(
        "/api/v1/jobs", json=notification(receiver.url("/deny"), max_retries=1, idempotency_key="n-1"), headers=headers
    )
    assert answer.status_code == 201, answer.text
    job = answer.json()
    assert_masked(job)
    done = await until_status(api, headers, job["id"], 30)
    assert done["status"] == "dead_lettered"
    assert_masked(done)

    # The handler sent the clear values, and signed with the clear secret.
    calls = receiver.on("/deny")
    assert len(calls) == 2  # the first attempt and its retry
    for call in calls:
        assert {name: call.headers[name.lower()] for name in CREDENTIALS} == CREDENTIALS
        Webhook(SECRET).verify(call.body, call.headers)

    # Every event, webhook delivery included, shows the mask.
    async def both_events() -> list[Received] | None:
        got = receiver.on("/events")
        return got if len(got) >= 2 else None

    deliveries = await wait_for(both_events, within=20)
    assert deliveries is not None
    for delivery in deliveries:
        assert_masked(json.loads(delivery.body)["data"]["job"])
    assert {json.loads(d.body)["type"] for d in deliveries} == {"job.retrying", "job.dead_lettered"}
    assert_clear_of_secrets(json.dumps(await trail(api, headers, job["id"])))

    # Lists, the DLQ and an idempotent replay of the same request.
    listed = (await api.client.get("/api/v1/jobs?job_type=notification", headers=headers)).json()["items"]
    assert [j["id"] for j in listed] == [job["id"]]
    assert_masked(listed[0])
    dlq = await api.client.get("/api/v1/dlq?job_type=notification", headers=headers)
    assert dlq.status_code == 200 and job["id"] in dlq.text
    assert_clear_of_secrets(dlq.text)
    again = await api.client.post(
        "/api/v1/jobs", json=notification(receiver.url("/deny"), max_retries=1, idempotency_key="n-1"), headers=headers
    )
    assert (again.status_code, again.json()["id"]) == (200, job["id"])
    assert_masked(again.json())

    # At rest: sealed, nothing in clear in the job's row or its audit rows.
    async with db.connect() as conn:
        row = (await conn.execute(select(JOBS).where(JOBS.c.id == job["id"]))).one()._mapping
        audit = (await conn.execute(select(JOB_EVENTS.c.detail).where(JOB_EVENTS.c.job_id == job["id"]))).all()
    assert row["sealed"] and row["sealed"].startswith("gAAAA")
    assert_clear_of_secrets(json.dumps({k: str(v) for k, v in row.items()}) + str(audit))


async def test_a_batch_seals_each_notification_and_other_jobs_carry_nothing_sealed(
    api: Api, worker: JobWorker, receiver: Receiver, db: AsyncEngine
) -> None:
    headers = await api.new_client("payload-secrets-batch")
    jobs = [notification(receiver.url("/batch")), {"job_type": "echo", "payload": {"secret": "not-a-credential"}}]
    answer = await api.client.post("/api/v1/jobs/batch", json={"jobs": jobs}, headers=headers)
    assert answer.status_code == 201, answer.text
    sent, echo = (item["job"] for item in answer.json()["items"])
    assert_masked(sent)
    assert echo["payload"] == {"secret": "not-a-credential"}  # another job type's payload is its own business
    assert (await until_status(api, headers, sent["id"], 30))["status"] == "succeeded"
    [call] = receiver.on("/batch")
    assert call.headers["authorization"] == CREDENTIALS["authorization"]
    async with db.connect() as conn:
        sealed = dict(
            (await conn.execute(select(JOBS.c.id, JOBS.c.sealed).where(JOBS.c.id.in_([sent["id"], echo["id"]])))).all()
        )
    assert sealed[echo["id"]] is None and sealed[sent["id"]].startswith("gAAAA")


async def test_a_changed_credential_is_another_request_for_an_idempotency_key(api: Api) -> None:
    headers = await api.new_client("payload-secrets-idem")
    first = notification("http://127.0.0.1:9/x", idempotency_key="n-2", delay_seconds=3600)
    assert (await api.client.post("/api/v1/jobs", json=first, headers=headers)).status_code == 201
    changed = json.loads(json.dumps(first))
    changed["payload"]["headers"]["authorization"] = "Bearer another-token-123"
    answer = await api.client.post("/api/v1/jobs", json=changed, headers=headers)
    assert answer.status_code == 409, answer.text
    assert_clear_of_secrets(answer.text)
    assert "another-token-123" not in answer.text


async def test_a_schedule_s_job_keeps_its_credentials_sealed_and_its_firings_send_them(
    api: Api, worker: JobWorker, receiver: Receiver, db: AsyncEngine
) -> None:
    headers = await api.new_client("payload-secrets-schedule")
    body = {"name": "nightly", "cron": "0 3 * * *", "job": notification(receiver.url("/scheduled"))}
    created = await api.client.post("/api/v1/schedules", json=body, headers=headers)
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert_masked(schedule["job"])
    assert_masked((await api.client.get(f"/api/v1/schedules/{schedule['id']}", headers=headers)).json()["job"])
    assert_clear_of_secrets((await api.client.get("/api/v1/schedules", headers=headers)).text)

    fired = await api.client.post(f"/api/v1/schedules/{schedule['id']}/trigger", headers=headers)
    assert fired.status_code in (201, 202), fired.text
    assert_masked(fired.json())
    assert (await until_status(api, headers, fired.json()["id"], 30))["status"] == "succeeded"
    [call] = receiver.on("/scheduled")
    assert {name: call.headers[name.lower()] for name in CREDENTIALS} == CREDENTIALS
    Webhook(SECRET).verify(call.body, call.headers)

    patched = await api.client.patch(
        f"/api/v1/schedules/{schedule['id']}", json={"job": notification(receiver.url("/patched"))}, headers=headers
    )
    assert patched.status_code == 200, patched.text
    assert_masked(patched.json()["job"])
    async with db.connect() as conn:
        row = (await conn.execute(select(SCHEDULES).where(SCHEDULES.c.id == schedule["id"]))).one()._mapping
    assert_clear_of_secrets(json.dumps({k: str(v) for k, v in row.items()}))
    assert row["sealed"].startswith("gAAAA")


async def test_a_cron_firing_sends_the_credentials_its_schedule_sealed(
    api: Api, worker: JobWorker, receiver: Receiver
) -> None:
    headers = await api.new_client("payload-secrets-cron")
    body = {"name": "every-second", "cron": "* * * * * *", "job": notification(receiver.url("/fired"))}
    schedule = (await api.client.post("/api/v1/schedules", json=body, headers=headers)).json()

    async def fired() -> Received | None:
        return next(iter(receiver.on("/fired")), None)

    call = await wait_for(fired, within=20)
    assert (await api.client.delete(f"/api/v1/schedules/{schedule['id']}", headers=headers)).status_code == 204
    assert call is not None
    assert {name: call.headers[name.lower()] for name in CREDENTIALS} == CREDENTIALS
    Webhook(SECRET).verify(call.body, call.headers)
