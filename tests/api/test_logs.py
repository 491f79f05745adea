"""GET /api/v1/logs: every process's latest warnings and errors in one list, with secrets redacted."""

import logging
import os
import re
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from loguru import logger
from redis.asyncio import Redis

from app.core.config import Settings
from app.core.logging import configure_logging
from app.core.recent_logs import RecentLogs
from app.core.redaction import Redactor
from app.core.signing import new_secret
from app.main import create_app
from app.services.api_keys import new_key
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.receiver import Receiver
from tests.support import Api, api_with, app_process, free_port, until_serving, until_status, wait_for

LOGS = "/api/v1/logs"


async def recent(client: httpx.AsyncClient, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    answer = await client.get(LOGS, params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    records: list[dict[str, Any]] = answer.json()
    return records


async def logged(api: Api, marker: str, **params: Any) -> dict[str, Any]:
    """Wait until a record whose message holds `marker` is listed, and return it."""

    async def found() -> dict[str, Any] | None:
        records = await recent(api.client, api.admin, limit=1000, **params)
        return next((record for record in records if marker in record["message"]), None)

    record: dict[str, Any] = await wait_for(found, within=15)
    return record


@pytest.fixture
def configured_logging(settings: Settings) -> Iterator[None]:
    """This process's logging as a service process has it (patcher and stderr sink); the defaults come back."""
    handlers = logging.root.handlers[:]
    configure_logging(settings)
    try:
        yield
    finally:
        logger.remove()
        logger.configure(patcher=lambda record: None)
        logger.add(sys.stderr)
        logging.root.handlers = handlers


@pytest.fixture
async def logging_api(configured_logging: None, settings: Settings) -> AsyncIterator[Api]:
    async with api_with(create_app(settings), ADMIN_KEY) as running:
        yield running


async def test_warnings_of_a_worker_process_and_of_the_api_are_listed_with_their_process(
    api: Api, tmp_path: Path
) -> None:
    headers = await api.new_client("logs-processes")
    with app_process(["worker", "jobs"], settings_env(make_settings()), tmp_path / "worker.log") as worker:
        job = (await api.submit(headers, job_type="flaky", payload={"fail_times": 5}, max_retries=0)).json()
        await until_status(api, headers, job["id"], 30, "dead_lettered")
        from_worker = await logged(api, f"job {job['id']} dead-lettered")
        marker = f"api-warning-{uuid.uuid4().hex}"
        logger.warning("{} in the API process", marker)
        from_api = await logged(api, marker)
    assert from_api["process"] == f"{socket.gethostname()}:{os.getpid()}"
    assert from_worker["process"] == f"{socket.gethostname()}:{worker.popen.pid}"
    assert from_worker["level"] == "WARNING" and from_worker["logger"] == "app.workers.jobs.worker"
    assert set(from_api) == {"time", "level", "process", "logger", "message", "request_id"}
    records = await recent(api.client, api.admin)
    assert records.index(from_api) < records.index(from_worker)  # newest first


async def test_the_level_filter_and_the_limit(api: Api) -> None:
    marker = uuid.uuid4().hex
    logger.info("{} info", marker)
    logger.warning("{} warning", marker)
    logger.error("{} error", marker)
    logger.critical("{} critical", marker)
    await logged(api, f"{marker} critical")  # the newest: the ones before it are there too

    def ours(records: list[dict[str, Any]]) -> list[str]:
        return [record["message"] for record in records if marker in record["message"]]

    everything = ours(await recent(api.client, api.admin, level="DEBUG", limit=1000))
    assert everything == [f"{marker} critical", f"{marker} error", f"{marker} warning"]  # INFO is not kept
    errors = await recent(api.client, api.admin, level="ERROR", limit=1000)
    assert {record["level"] for record in errors} <= {"ERROR", "CRITICAL"}
    assert ours(errors) == [f"{marker} critical", f"{marker} error"]
    assert ours(await recent(api.client, api.admin, level="WARNING", limit=2)) == ours(errors)
    assert len(await recent(api.client, api.admin, limit=1)) == 1


async def test_a_succeeded_job_writes_one_info_line_that_the_logs_find_by_its_request_id(
    configured_logging: None,
) -> None:
    request_id = f"req-finished-{uuid.uuid4().hex}"
    app = create_app(make_settings(log_level="INFO", embedded_workers=True))
    async with api_with(app, ADMIN_KEY) as running:
        headers = {**await running.new_client("logs-finished"), "X-Request-ID": request_id}
        job = (await running.submit(headers, job_type="echo", payload={"n": 7})).json()
        await until_status(running, headers, job["id"], 30, "succeeded")
        record = await logged(running, request_id, level="INFO")
        warnings = await recent(running.client, running.admin, level="WARNING", limit=1000)
    assert (record["level"], record["request_id"], record["logger"]) == ("INFO", request_id, "app.services.job_log")
    line = rf"job {job['id']} \(echo\) succeeded: 1 attempt\(s\), run time \d+\.\d{{3}}s, request {request_id}"
    assert re.fullmatch(line, record["message"]), record["message"]
    assert {r["level"] for r in warnings} <= {"WARNING", "ERROR", "CRITICAL"}  # INFO lines have a list of their own


@pytest.mark.parametrize("params", [{"level": "LOUD"}, {"limit": 0}, {"limit": 1001}, {"limit": "many"}])
async def test_an_unknown_level_or_a_limit_outside_1_to_1000_is_a_422(api: Api, params: dict[str, Any]) -> None:
    answer = await api.client.get(LOGS, params=params, headers=api.admin)
    assert answer.status_code == 422
    assert answer.json()["code"] == "validation_error" and answer.json()["errors"][0]["loc"][-1] in params


async def test_logs_are_for_admins_only(api: Api) -> None:
    client = await api.new_client("logs-not-admin")
    forbidden = await api.client.get(LOGS, headers=client)
    assert forbidden.status_code == 403 and forbidden.json()["code"] == "forbidden"
    assert (await api.client.get(LOGS)).status_code == 401


async def test_secrets_in_a_message_are_redacted_in_the_list_and_on_stderr(
    logging_api: Api, settings: Settings, capfd: pytest.CaptureFixture[str]
) -> None:
    key, secret, token = new_key(), new_secret(), "opaque-" + uuid.uuid4().hex
    assert settings.secret_encryption_key
    secrets = [key, secret, token, settings.secret_encryption_key]
    marker = uuid.uuid4().hex
    seen: list[str] = []
    sink = logger.add(lambda message: seen.append(message.record["message"]), level="WARNING")
    logger.warning(
        "{} key={} secret={} headers={} box={}",
        marker,
        key,
        secret,
        {"Authorization": f"Bearer {token}"},
        settings.secret_encryption_key,
    )
    try:
        raise ValueError(f"refused {key}")
    except ValueError:
        logger.exception("{} failed", marker)
    logger.remove(sink)
    record = await logged(logging_api, f"{marker} failed")
    plain = await logged(logging_api, f"{marker} key=")
    assert "ValueError: refused [redacted]" in record["message"]
    assert plain["message"].count("[redacted]") == 4
    stderr = capfd.readouterr().err
    assert f"{marker} key=[redacted]" in stderr and "ValueError: refused [redacted]" in stderr
    listed = (await logging_api.client.get(LOGS, params={"limit": 1000}, headers=logging_api.admin)).text
    assert not [s for s in secrets if s in stderr or s in listed or any(s in message for message in seen)]
    assert len(seen) == 2  # any sink gets the redacted message: the patcher ran before it


async def test_no_secret_reaches_any_log_of_a_run_that_registers_keys_and_webhooks(
    receiver: Receiver, tmp_path: Path
) -> None:
    port = free_port()
    base = make_settings(port=port, log_level="DEBUG")
    env = settings_env(base)
    json_env = {**env, "LOG_FORMAT": "json"}
    logs = [tmp_path / "api.log", tmp_path / "jobs.log", tmp_path / "webhooks.log"]
    receiver.statuses = [500]  # one failed attempt, then a retry that lands
    with (
        app_process(["api"], env, logs[0]),
        app_process(["worker", "jobs"], json_env, logs[1]),
        app_process(["worker", "webhooks"], env, logs[2]),
    ):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            secrets, listed = await _register_and_deliver(client, receiver)
            metrics = (await client.get("/metrics")).text
    everything = "\n".join(path.read_text(errors="replace") for path in logs) + listed + metrics
    assert "dead-lettered" in everything and "API ready" in everything  # the scan had the run's lines to read
    assert "jobs_submitted_total{" in metrics  # ... and the service's metrics
    assert base.secret_encryption_key and base.admin_api_key
    secrets += [base.secret_encryption_key, base.admin_api_key]
    assert [s for s in secrets if s in everything] == []


async def _register_and_deliver(client: httpx.AsyncClient, receiver: Receiver) -> tuple[list[str], str]:
    """Create a key and a webhook, run a job to a delivery and one to the DLQ; the secrets and the logs listed."""
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}

    await until_serving(client)
    created = await client.post("/api/v1/api-keys", json={"client_id": "logs-scan"}, headers=admin)
    key = created.json()["api_key"]
    headers = {"Authorization": f"Bearer {key}"}
    hook = await client.post(
        "/api/v1/webhooks", json={"url": receiver.url(), "events": ["job.succeeded"]}, headers=headers
    )
    secret = hook.json()["secret"]
    assert (await client.get("/api/v1/jobs", headers={"Authorization": f"Bearer {key}x"})).status_code == 401
    await client.post("/api/v1/jobs", json={"job_type": "echo", "payload": {"n": 1}}, headers=headers)
    failing = {"job_type": "flaky", "payload": {"fail_times": 5}, "max_retries": 0}
    dead = (await client.post("/api/v1/jobs", json=failing, headers=headers)).json()

    async def delivered() -> bool:
        return len(receiver.on("/hook")) >= 2

    async def dead_lettered() -> str | None:
        answer = await client.get(LOGS, params={"limit": 1000}, headers=admin)
        return answer.text if f"job {dead['id']} dead-lettered" in answer.text else None

    await wait_for(delivered, within=30)
    listed: str = await wait_for(dead_lettered, within=30)
    return [key, secret], listed


async def test_with_redis_away_logging_does_not_wait_and_records_are_dropped_and_counted() -> None:
    unreachable = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_timeout=2, socket_connect_timeout=2)
    shipper = RecentLogs(unreachable, ("unused", "unused:info"), Redactor())
    shipper.start()
    try:
        started = time.monotonic()
        for n in range(100):
            logger.warning("while Redis is away {}", n)
        assert time.monotonic() - started < 1  # a wait on Redis would be a connect attempt per record

        async def all_dropped() -> bool:
            return shipper.dropped >= 100

        await wait_for(all_dropped)
    finally:
        await shipper.stop()
        await unreachable.aclose()
