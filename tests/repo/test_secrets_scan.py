"""Secrets stay secret across a whole run in separate processes: API keys, webhook secrets, `Authorization` values,
a notification job's credentials, a URL's access token and SECRET_ENCRYPTION_KEY appear in no log line of any
process, in no answer after the one that created them, in no /metrics, and nowhere in the database in clear."""

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response

from app.core.secret_box import SecretBox
from app.models.base import Base
from app.models.tables import API_KEYS, CLIENT_SECRETS, ENDPOINTS
from app.services.api_keys import hash_key
from tests.conftest import ADMIN_KEY, TEST_SETTINGS, make_settings, settings_env
from tests.receiver import Receiver
from tests.support import app_process, free_port, until_serving, wait_for

KEYS_SETTING = f"{TEST_SETTINGS['secret_encryption_key']},{'an-older-encryption-key-' + uuid.uuid4().hex}"


@dataclass(frozen=True)
class Run:
    """What a run created: each secret as it was shown once, and the ids."""

    key: str
    wrong_key: str
    first_secret: str
    rotated_secret: str
    default_secret: str
    key_id: str
    webhook_id: str
    job_id: str
    in_payload: tuple[str, ...] = ()  # a notification's secret and credential header, its URL's access token

    @property
    def secrets(self) -> list[str]:
        shown = [self.first_secret, self.rotated_secret, self.default_secret]
        configured = [ADMIN_KEY, KEYS_SETTING, *KEYS_SETTING.split(",")]
        stripped = (secret.removeprefix("whsec_") for secret in shown)
        return [self.key, self.wrong_key, *configured, *shown, *stripped, *self.in_payload]


class Recorder:
    """An HTTP client of the API that keeps every answer it gets."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.answers: list[str] = []

    async def __call__(self, method: str, path: str, key: str, **options: Any) -> httpx.Response:
        answer = await self.client.request(method, path, headers={"Authorization": f"Bearer {key}"}, **options)
        self.answers.append(f"{method} {path} {answer.status_code}\n{answer.headers}\n{answer.text}")
        return answer


@pytest.mark.slow
async def test_no_secret_appears_in_logs_answers_metrics_or_the_database_in_clear(
    receiver: Receiver, db: AsyncEngine, tmp_path: Path
) -> None:
    port, jobs_metrics, hooks_metrics = free_port(), free_port(), free_port()
    common: dict[str, Any] = {"log_level": "DEBUG", "secret_encryption_key": KEYS_SETTING}
    api_env = settings_env(make_settings(port=port, **common))
    jobs_env = settings_env(make_settings(metrics_port=jobs_metrics, **common))
    hooks_env = settings_env(make_settings(metrics_port=hooks_metrics, **common))
    logs = [tmp_path / "api.log", tmp_path / "jobs.log", tmp_path / "hooks.log"]
    with (
        app_process(["api"], api_env, logs[0]) as api,
        app_process(["worker", "jobs"], jobs_env, logs[1]) as jobs,
        app_process(["worker", "webhooks"], hooks_env, logs[2]) as hooks,
    ):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            await until_serving(client)
            call = Recorder(client)
            run = await _a_run(call, receiver)
            answers_after_creation = list(call.answers)
            metrics = [(await client.get("/metrics")).text]
            for metrics_port in (jobs_metrics, hooks_metrics):
                metrics.append((await client.get(f"http://127.0.0.1:{metrics_port}/metrics")).text)
        for process in (api, jobs, hooks):
            await asyncio.to_thread(process.terminate, 30)  # each writes its last lines as it stops
    lines = [line for log in logs for line in log.read_text(errors="replace").splitlines()]
    assert any(run.job_id in line for line in lines)  # the logs did see this run's work
    for secret in run.secrets:
        for where, texts in (("a log", lines), ("an answer", answers_after_creation), ("/metrics", metrics)):
            leaks = [text for text in texts if secret in text]
            assert leaks == [], f"a secret appears in {where}: {leaks[:3]}"
    await _stored_only_sealed_or_hashed(db, run)


async def _a_run(call: Recorder, receiver: Receiver) -> Run:
    """Create a key and a webhook, rotate its secret, deliver, read everything back; the secrets, shown once each,
    and the ids. Answers recorded from the first read on, never the ones that created a secret."""
    created_key = await call("POST", "/api/v1/api-keys", ADMIN_KEY, json={"client_id": "secret-scan"})
    key = created_key.json()["api_key"]
    hook = await call("POST", "/api/v1/webhooks", key, json={"url": receiver.url("/scan")})
    rotated = await call("POST", f"/api/v1/webhooks/{hook.json()['id']}/rotate-secret", key)
    default = await call("GET", "/api/v1/webhooks/default-secret", key)
    shown = [hook.json()["secret"], rotated.json()["secret"], default.json()["secret"]]
    call.answers.clear()
    wrong_key = "tq_" + uuid.uuid4().hex + uuid.uuid4().hex
    assert (await call("GET", "/api/v1/jobs", wrong_key)).status_code == 401
    # A job that dies logs a warning with its id in every process's recent logs, and is delivered twice.
    dying = {"job_type": "flaky", "payload": {"permanent": True}, "max_retries": 0, "callback_url": receiver.url("/cb")}
    job = (await call("POST", "/api/v1/jobs", key, json=dying)).json()

    async def delivered() -> bool:
        logs = (await call("GET", f"/api/v1/jobs/{job['id']}/logs", key)).json()
        return len(logs) == 2 and all(d["status"] == "succeeded" for d in logs)

    await wait_for(delivered, within=30)
    in_payload = await _a_notification_that_dies(call, key, receiver)
    hook_id = hook.json()["id"]
    for path in (f"/api/v1/jobs/{job['id']}", "/api/v1/jobs", "/api/v1/webhooks", f"/api/v1/webhooks/{hook_id}"):
        assert (await call("GET", path, key)).status_code == 200
    assert (await call("GET", f"/api/v1/webhooks/{hook_id}/deliveries", key)).status_code == 200
    assert (await call("GET", "/api/v1/api-keys", ADMIN_KEY)).status_code == 200
    recent = await call("GET", "/api/v1/logs?level=DEBUG&limit=1000", ADMIN_KEY)
    assert f"job {job['id']} dead-lettered" in recent.text
    assert len(receiver.on("/scan")) == 2 and len(receiver.on("/cb")) == 1
    ids = {"key_id": created_key.json()["id"], "webhook_id": hook_id, "job_id": job["id"]}
    return Run(key, wrong_key, *shown, **ids, in_payload=in_payload)


async def _a_notification_that_dies(call: Recorder, key: str, receiver: Receiver) -> tuple[str, ...]:
    """A notification with credentials in its payload and its URL, refused by its receiver: dead-lettered, logged
    and delivered to the webhook; the credentials it carried."""
    secret, token, url_token = "notify-secret-" + uuid.uuid4().hex, "bearer-" + uuid.uuid4().hex, uuid.uuid4().hex
    receiver.answer = lambda request: Response(status_code=403 if request.path == "/notify" else 200)
    url = receiver.url("/notify") + f"?access_token={url_token}"
    payload = {"url": url, "secret": secret, "headers": {"Authorization": f"Bearer {token}"}}
    job = (await call("POST", "/api/v1/jobs", key, json={"job_type": "notification", "payload": payload})).json()

    async def delivered_dead() -> bool:  # its job.dead_lettered event reached the webhook
        return any(job["id"] in request.body.decode() for request in receiver.on("/scan"))

    await wait_for(delivered_dead, within=30)
    assert len(receiver.on("/notify")) == 1
    return secret, token, url_token


async def _stored_only_sealed_or_hashed(db: AsyncEngine, run: Run) -> None:
    """No column of any table holds a secret in clear; the webhook secrets are sealed, the key is hashed."""
    async with db.connect() as conn:
        for table in Base.metadata.sorted_tables:
            rows = (await conn.execute(select(table))).all()
            text = "\n".join(repr(tuple(row)) for row in rows)
            assert [secret for secret in run.secrets if secret in text] == [], table.name
        key_row = (await conn.execute(select(API_KEYS).where(API_KEYS.c.id == run.key_id))).one()
        endpoint = (await conn.execute(select(ENDPOINTS).where(ENDPOINTS.c.id == run.webhook_id))).one()
        default = (await conn.execute(select(CLIENT_SECRETS).where(CLIENT_SECRETS.c.client_id == "secret-scan"))).one()
    assert key_row.key_hash == hash_key(run.key)
    box = SecretBox(KEYS_SETTING)
    assert (box.open(endpoint.secret), box.open(endpoint.previous_secret)) == (run.rotated_secret, run.first_secret)
    assert box.open(default.secret) == run.default_secret
