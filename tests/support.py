"""Test helpers: an API client, a broker probe, polling, outages of private services and subprocesses."""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import aio_pika
import httpx
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage
from fastapi import FastAPI
from redis.asyncio import Redis
from sqlalchemy import ColumnElement, delete, event, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.core.secret_box import SecretBox
from app.core.topology import Topology
from app.models.tables import JOB_EVENTS, JOBS, OUTBOX
from app.schemas.flow import flow_columns
from app.schemas.unique import unique_columns
from app.services.outbox import Outbox
from app.stores import Stores, open_stores
from app.workers.jobs.batches import JobBatches
from app.workers.jobs.flow import Admissions
from app.workers.jobs.locks import JobLocks
from app.workers.verdicts import Verdict
from tests.local.ports import free_port as free_port  # one rule for every port a test or a bench run listens on
from tests.local.private_services import PrivateRabbit, PrivateRedis

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


async def wait_for(check: Callable[[], Awaitable[T]], within: float = 15, interval: float = 0.05) -> T:
    """Poll `check` until it returns something truthy; fail with the last value after `within` seconds."""
    deadline = time.monotonic() + within
    value = await check()
    while not value:
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s (last value: {value!r})")
        await asyncio.sleep(interval)
        value = await check()
    return value


@contextlib.contextmanager
def statements(engine: AsyncEngine, autocommit: bool = False) -> Iterator[list[Any]]:
    """The SQL the engine sends while the block runs (a listener also sends the PostgreSQL stores' direct
    statements through SQLAlchemy: app/stores/postgres.rows); with `autocommit`, each as (SQL, whether its
    connection was in autocommit, outside any transaction)."""
    sent: list[Any] = []

    def seen(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        alone = conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
        sent.append((statement, alone) if autocommit else statement)

    event.listen(engine.sync_engine, "before_cursor_execute", seen)
    try:
        yield sent
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", seen)


async def waiting_on_a_row_lock(db: AsyncEngine, naming: str = "jobs") -> bool:
    """Whether a statement of this test database that names the table `naming` is waiting for a row lock (within
    the first kilobyte of its text: pg_stat_activity keeps no more)."""
    query = text(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND query ILIKE :naming"
    )
    async with db.connect() as conn:
        return bool((await conn.execute(query, {"naming": f"%{naming}%"})).scalar_one())


async def until_serving(client: httpx.AsyncClient, within: float = 30) -> None:
    """Wait until the service behind `client` answers `GET /health` with 200."""

    async def serving() -> bool:
        try:
            return (await client.get("/health")).status_code == 200
        except httpx.TransportError:
            return False

    await wait_for(serving, within=within)


@dataclass
class Api:
    app: FastAPI
    client: httpx.AsyncClient
    admin_key: str

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_key}"}

    async def new_client(self, client_id: str) -> dict[str, str]:
        """Headers carrying a fresh key for `client_id`."""
        answer = await self.client.post("/api/v1/api-keys", json={"client_id": client_id}, headers=self.admin)
        assert answer.status_code == 201, answer.text
        return {"Authorization": f"Bearer {answer.json()['api_key']}"}

    async def submit(self, headers: dict[str, str], **body: Any) -> httpx.Response:
        body.setdefault("job_type", "echo")
        body.setdefault("payload", {"n": 1})
        return await self.client.post("/api/v1/jobs", json=body, headers=headers)

    async def job(self, headers: dict[str, str], job_id: str) -> dict[str, Any]:
        answer = await self.client.get(f"/api/v1/jobs/{job_id}", headers=headers)
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()
        return result


@dataclass
class BrokerProbe:
    connection: AbstractConnection
    channel: AbstractChannel
    topology: Topology

    @classmethod
    async def connect(cls, url: str, topology: Topology) -> "BrokerProbe":
        connection = await aio_pika.connect(url)
        return cls(connection, await connection.channel(), topology)

    async def depth(self, queue: str) -> int:
        declared = await self.channel.declare_queue(queue, passive=True)
        count = declared.declaration_result.message_count
        assert count is not None
        return count

    async def consumers(self, queue: str) -> int:
        declared = await self.channel.declare_queue(queue, passive=True)
        return declared.declaration_result.consumer_count or 0

    async def take_all(self, queue: str) -> list[AbstractIncomingMessage]:
        """Remove and return every message now in `queue`."""
        declared = await self.channel.declare_queue(queue, passive=True)
        messages = []
        while (message := await declared.get(no_ack=True, fail=False)) is not None:
            messages.append(message)
        return messages

    async def until_taken(self, queue: str, message_id: str, within: float = 15) -> list[str | None]:
        """Take messages from `queue` until the one with `message_id` is among them; the ids of all taken. Other
        tests' messages may reach a shared queue (a DLQ) meanwhile, so a test counts its own in what is taken."""
        taken: list[str | None] = []

        async def arrived() -> bool:
            taken.extend(message.message_id for message in await self.take_all(queue))
            return message_id in taken

        await wait_for(arrived, within=within)
        return taken

    async def purge(self, *queues: str) -> None:
        for name in queues:
            declared = await self.channel.declare_queue(name, passive=True)
            await declared.purge()

    async def close(self) -> None:
        await self.connection.close()


def rabbitmqctl_json(*args: str) -> list[dict[str, Any]]:
    """What a `rabbitmqctl` listing command prints, one dict per row."""
    out = subprocess.run(
        ["rabbitmqctl", *args, "--formatter", "json", "-q"], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


@contextlib.contextmanager
def rabbitmq_stopped(rabbit: PrivateRabbit) -> Iterator[None]:
    """Stop the RabbitMQ application of a node of the test's own for the block; always start it again."""
    rabbit.stop_app()
    try:
        yield
    finally:
        rabbit.start_app()


@contextlib.contextmanager
def redis_stopped(redis: PrivateRedis) -> Iterator[None]:
    """Stop a Redis of the test's own for the block (what it held is gone); always start it again, same port."""
    redis.stop()
    try:
        yield
    finally:
        redis.start()


@contextlib.asynccontextmanager
async def broker_probe(url: str, topology: Topology) -> AsyncIterator[BrokerProbe]:
    """A `BrokerProbe` on the broker at `url`, closed on the way out."""
    probe = await BrokerProbe.connect(url, topology)
    try:
        yield probe
    finally:
        await probe.close()


@dataclass
class Process:
    """A service process started by a test: `python -m app ...`."""

    popen: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def app_process(
    args: list[str], env: dict[str, str], log: Path, module: str = "app", python: str = sys.executable
) -> Iterator[Process]:
    """Run `python -m app <args>` (or a test launcher of it, `module`; with another interpreter, `python`); killed on
    the way out whatever happens, with every process it started (an API of several processes): it leads a process
    group of its own."""
    with log.open("wb") as out:
        command = [python, "-m", module, *args]
        popen = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=out, start_new_session=True)
    process = Process(popen, log)
    try:
        yield process
    finally:
        if popen.poll() is None:
            popen.kill()
            popen.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)  # children that outlived it


def env_without_dotenv(env: dict[str, str]) -> dict[str, str]:
    """Subprocesses run in the repo root, where a developer's `.env` may exist: settings in env win anyway."""
    return {**env, "PYTHONUNBUFFERED": "1", **{k: v for k, v in os.environ.items() if k == "PATH"}}


TERMINAL = {"succeeded", "dead_lettered", "cancelled"}


async def until_status(
    api: Api, headers: dict[str, str], job_id: str, within: float = 20, *statuses: str
) -> dict[str, Any]:
    """Wait until the job reaches one of `statuses` (default: any terminal status) and return it."""
    wanted = set(statuses) or TERMINAL

    async def reached() -> dict[str, Any] | None:
        job = await api.job(headers, job_id)
        return job if job["status"] in wanted else None

    result = await wait_for(reached, within=within)
    assert result is not None
    return result


async def trail(api: Api, headers: dict[str, str], job_id: str) -> list[dict[str, Any]]:
    answer = await api.client.get(f"/api/v1/jobs/{job_id}/events", headers=headers)
    assert answer.status_code == 200
    events: list[dict[str, Any]] = answer.json()
    return events


def make_job(at: datetime | None = None, **overrides: Any) -> dict[str, Any]:
    """A full jobs row, as the API's submit builds it; a fresh id and client unless overridden."""
    at = at or datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    job: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "client_id": "c_" + uuid.uuid4().hex[:12],
        "job_type": "echo",
        "status": "pending",
        "priority": 5,
        "max_retries": 3,
        "timeout_seconds": None,
        "attempts": 0,
        "runs": 0,
        "seq": 0,
        "payload": {"n": 1},
        "result": None,
        "error": None,
        "dead_reason": None,
        "idempotency_key": None,
        "request_hash": None,
        "callback_url": None,
        "request_id": None,
        "lease_until": None,
        "next_attempt_at": None,
        "created_at": at,
        "updated_at": at,
        "started_at": None,
        "finished_at": None,
        "held": None,
        **flow_columns(None, None),
        "workflow_id": None,
        "ref": None,
        "depends_on": None,
        "deps_left": None,
        **unique_columns(None),
        "progress": None,
        "cancel_requested_at": None,
        "failure_group": None,
    }
    return {**job, **overrides}


def make_delivery(delivery_id: str, job_id: str, client_id: str, at: datetime) -> dict[str, Any]:
    """A full deliveries row: a callback that failed twice and is given up, written at `at`."""
    return {
        "id": delivery_id,
        "event_id": f"evt_{delivery_id}",
        "target": "callback",
        "endpoint_id": None,
        "client_id": client_id,
        "job_id": job_id,
        "event_type": "job.succeeded",
        "url": "http://127.0.0.1:9/",
        "body": b"{}",
        "request_id": None,
        "status": "failed",
        "attempt_count": 2,
        "budget_used": 2,
        "next_attempt_at": None,
        "lease_until": None,
        "created_at": at,
        "updated_at": at,
    }


@contextlib.asynccontextmanager
async def api_with(app: FastAPI, admin_key: str) -> AsyncIterator[Api]:
    """An app in this process, lifespan and all, behind an httpx client."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30) as client:
            yield Api(app, client, admin_key)


class NoBroker:
    """Stands in for the broker where a test needs no message to leave: every publish fails as if it were down."""

    async def publish_many(self, messages: list[Any]) -> list[Exception]:
        return [RuntimeError("no broker in this test") for _ in messages]


def stores_for(engine: AsyncEngine, names: Names, box: SecretBox | None = None) -> Stores:
    """The stores a process would open for this engine (a job's lease: 30 s; `box` opens the delivery secrets, none
    by default), keeping no connection between statements, so a test need not close them."""
    stores = open_stores(engine, names, lease_seconds=30, box=box or SecretBox(None))
    if stores.connections is not None:
        stores.connections.keeping = False
    return stores


def outbox_for(stores: Stores, broker: Any, relay_after: float = 60, hold_seconds: float = 15) -> Outbox:
    """An outbox over these stores that publishes through `broker` (a `NoBroker` keeps every row staged)."""
    return Outbox(stores.jobs, stores.outbox, broker, relay_after, batch_size=10, hold_seconds=hold_seconds)


@contextlib.asynccontextmanager
async def job_batches(engine: AsyncEngine, names: Names, redis_url: str) -> AsyncIterator[JobBatches]:
    """The job worker's claim and finish batches, as production runs them (real Redis locks, keyed jobs admitted
    in the claim's transaction; no releaser runs), publishing nothing."""
    redis = Redis.from_url(redis_url)
    stores = stores_for(engine, names)
    try:
        outbox = outbox_for(stores, NoBroker())
        admissions = Admissions(stores.flow, outbox)
        yield JobBatches(stores.jobs, JobLocks(redis, 30_000), names, outbox, admissions)
    finally:
        await stores.close()
        await redis.aclose()


async def claim_many(engine: AsyncEngine, names: Names, redis_url: str, job_ids: list[str]) -> list[Verdict]:
    """What one claim batch of the job worker decides for these jobs' messages, in their order."""
    async with job_batches(engine, names, redis_url) as batches:
        return [verdict for verdict, _ in await batches.claim_batch(job_ids)]


async def drop_jobs(engine: AsyncEngine, jobs: ColumnElement[bool]) -> None:
    """Delete the jobs matching `jobs` (a store test's), with their audit rows and the outbox rows staged for them:
    no later process's relay publishes them, and no later release (a resumed type's, a key's, a client's turn)
    sends them into the test namespace's lanes."""
    ours = select(JOBS.c.id).where(jobs)
    async with engine.begin() as conn:
        await conn.execute(delete(OUTBOX).where(OUTBOX.c.message_id.in_(ours)))
        await conn.execute(delete(JOB_EVENTS).where(JOB_EVENTS.c.job_id.in_(ours)))
        await conn.execute(delete(JOBS).where(jobs))
