"""Fixtures: one namespace and one fresh PostgreSQL database per test run, against the real services."""

import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TypeVar

import aio_pika
import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.database import make_engine
from app.core.statuses import WorkerState
from app.core.topology import build_topology
from app.main import create_app
from app.runtime import Runtime, add_worker_process
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker
from tests.local.cluster import Cluster, running_cluster
from tests.local.private_services import PrivateRabbit, PrivateRedis, running_rabbit, running_redis
from tests.receiver import Receiver, running_receiver
from tests.support import ROOT, Api, BrokerProbe, api_with, rabbitmqctl_json, wait_for

NS = "t" + uuid.uuid4().hex[:10]
DB_NAME = f"taskq_{NS}"
PG_URL = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{DB_NAME}"
ADMIN_KEY = "tq_admin_" + uuid.uuid4().hex
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/"
REDIS_URL = "redis://127.0.0.1:6379/0"

# Short delays everywhere: the same behaviour, only faster.
TEST_SETTINGS: dict[str, Any] = {
    "database_url": PG_URL,
    "rabbitmq_url": RABBITMQ_URL,
    "redis_url": REDIS_URL,
    "namespace": NS,
    "admin_api_key": ADMIN_KEY,
    "retry_base_delay": 0.2,
    "retry_max_delay": 1.6,
    "lock_ttl_seconds": 3,
    "publish_timeout_seconds": 2,
    "outbox_relay_after": 0,
    "outbox_relay_interval": 0.2,
    "scheduler_interval_seconds": 0.2,
    "pause_refresh_seconds": 0.2,
    "background_backoff_base_seconds": 1,
    "background_backoff_max_seconds": 4,
    "webhook_retry_schedule": "0.2,0.4",
    "webhook_timeout_seconds": 2,
    "webhook_consumers": 2,
    "webhook_fanout_consumers": 1,
    "webhook_breaker_cooldown_seconds": 1,
    "secret_encryption_key": "test-encryption-key-" + NS,
    "shutdown_grace_seconds": 10,
    "job_consumers_critical": 1,
    "job_consumers_default": 2,
    "job_consumers_bulk": 1,
    "embedded_workers": False,
    "webhook_allow_private_networks": True,  # the test receivers listen on 127.0.0.1
    "log_level": "WARNING",
    "rate_limit_per_minute": 100_000,  # tests that flood set their own
}


def make_settings(**overrides: Any) -> Settings:
    """Settings for this test run; `.env` is never read."""
    return Settings(_env_file=None, **{**TEST_SETTINGS, **overrides})


def settings_env(settings: Settings) -> dict[str, str]:
    """The same settings as environment variables, for subprocesses."""
    env = {k: v for k, v in os.environ.items() if not k.isupper() or k in ("PATH", "HOME", "LANG")}
    for name, value in settings.model_dump().items():
        if value is not None:
            env[name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
    env["PYTHONPATH"] = str(ROOT)
    return env


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qc", sql],
        check=True,
        capture_output=True,
    )


def migrate(url: str) -> None:
    """Run `python -m app migrate` against `url`, as an operator would."""
    env = settings_env(make_settings(database_url=url))
    result = subprocess.run([sys.executable, "-m", "app", "migrate"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="session", autouse=True)
def postgres_database() -> Iterator[str]:
    _psql(f'CREATE DATABASE "{DB_NAME}"')
    try:
        migrate(PG_URL)
        yield PG_URL
    finally:
        _psql(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


@pytest.fixture(scope="session", autouse=True)
async def clean_namespace() -> AsyncIterator[None]:
    """Remove this run's exchanges, queues and Redis keys afterwards."""
    yield
    await remove_namespace(make_settings())


def queues_named_under(namespace: str) -> list[str]:
    """Every queue on the broker inside `namespace`: tests that use other delays declare delay tiers the
    namespace's default topology does not name."""
    return [row["name"] for row in rabbitmqctl_json("list_queues", "name") if row["name"].startswith(f"{namespace}.")]


async def remove_namespace(settings: Settings) -> None:
    """Delete a namespace's exchanges, queues and Redis keys."""
    topology = build_topology(settings)
    connection = await aio_pika.connect(RABBITMQ_URL)
    async with connection:
        channel = await connection.channel()
        named = [queue.name for queue in topology.queues]
        for queue in [*named, *(name for name in queues_named_under(settings.namespace) if name not in named)]:
            await channel.queue_delete(queue)
        for exchange in topology.exchanges:
            await channel.exchange_delete(exchange.name)
    redis = Redis.from_url(REDIS_URL)
    keys = [key async for key in redis.scan_iter(match=f"{settings.namespace}:*")]
    if keys:
        await redis.delete(*keys)
    await redis.aclose()


@pytest.fixture
def settings() -> Settings:
    return make_settings()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three RabbitMQ nodes of this run's own beside the system broker (bench/cluster.py), started on first use;
    stopped and removed when the module that used them ends (idle, they still take much of a core), also when a
    test fails."""
    with running_cluster(tmp_path_factory.mktemp("cluster"), prefix=NS) as running:
        yield running


@pytest.fixture(scope="module")
def private_rabbit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRabbit]:
    """A RabbitMQ node of this run's own (tests/local/private_services.py), for the tests that stop their broker: the
    machine's is shared and never stopped. Started on first use, stopped and removed when the module that used it
    ends, also when a test fails."""
    with running_rabbit(tmp_path_factory.mktemp("rabbit"), prefix=NS) as rabbit:
        yield rabbit


@pytest.fixture
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    """A Redis of the test's own, for the tests that stop their Redis: the machine's is shared and never stopped."""
    with running_redis(tmp_path_factory.mktemp("redis")) as redis:
        yield redis


@pytest.fixture
async def api(settings: Settings) -> AsyncIterator[Api]:
    """The API in this process, lifespan and all, behind an httpx client."""
    async with api_with(create_app(settings), ADMIN_KEY) as running:
        yield running


@pytest.fixture
async def broker() -> AsyncIterator[BrokerProbe]:
    """A separate connection for looking into queues the way an operator would."""
    probe = await BrokerProbe.connect(RABBITMQ_URL, build_topology(make_settings()))
    try:
        yield probe
    finally:
        await probe.close()


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated once for the run, as an operator would; each test takes a copy of its file."""
    path = tmp_path_factory.mktemp("sqlite") / "migrated.db"
    migrate(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, migrated_sqlite: Path) -> str:
    """A fresh, migrated SQLite database of the test's own (a copy of the run's migrated file: a migration is a
    process start of about two seconds)."""
    path = tmp_path / "test.db"
    shutil.copyfile(migrated_sqlite, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    """A client of the test Redis."""
    client = Redis.from_url(REDIS_URL)
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture(params=["postgresql", "sqlite"])
async def engine(request: pytest.FixtureRequest, sqlite_url: str) -> AsyncIterator[AsyncEngine]:
    """The test database on PostgreSQL, then on a fresh SQLite file: the DB layer runs on both (rule 14)."""
    url = TEST_SETTINGS["database_url"] if request.param == "postgresql" else sqlite_url
    db = make_engine(url)
    try:
        yield db
    finally:
        await db.dispose()


W = TypeVar("W", JobWorker, WebhookWorker)
ROLES: dict[type[Any], str] = {JobWorker: "test-worker", WebhookWorker: "test-webhooks"}


@contextlib.asynccontextmanager
async def start_worker(kind: type[W], settings: Settings, background: bool = False) -> AsyncIterator[W]:
    """A job or webhook worker in this process, consuming the test namespace's queues, once all its consumers
    are. `background`: with the background workers a worker process runs (outbox relay, overdue republisher,
    retention, DLQ janitor). A webhook worker starts once earlier tests' job events are dropped, so its fan-out
    starts with this test's events rather than a backlog."""
    if kind is WebhookWorker:
        probe = await BrokerProbe.connect(RABBITMQ_URL, build_topology(settings))
        await probe.purge(probe.topology.names.webhook_events_queue)
        await probe.close()
    async with Runtime.opened(settings, role=ROLES[kind], grace=5) as runtime:
        started = add_worker_process(runtime, kind, background=background, observed=False)
        await runtime.start()

        async def running() -> bool:
            return started.state == WorkerState.RUNNING

        await wait_for(running, within=15)
        yield started


@pytest.fixture
async def worker(settings: Settings) -> AsyncIterator[JobWorker]:
    """A job worker in this process with the background workers a worker process runs."""
    async with start_worker(JobWorker, settings, background=True) as job_worker:
        yield job_worker


@pytest.fixture
async def webhook_worker(settings: Settings) -> AsyncIterator[WebhookWorker]:
    async with start_worker(WebhookWorker, settings) as hooks:
        yield hooks


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with running_receiver() as running:
        yield running


@pytest.fixture
async def db(settings: Settings) -> AsyncIterator[AsyncEngine]:
    """A direct line to the test database, for checks the API does not expose."""
    engine = make_engine(settings.database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


@contextlib.asynccontextmanager
async def world_of_its_own(name: str) -> AsyncIterator[dict[str, str]]:
    """A database and a namespace of their own, migrated, and removed afterwards: for a run whose jobs and
    messages no other test's worker, relay or scheduler may take (the fuzz run's generated jobs)."""
    namespace = f"{NS}{name}"
    database = f"taskq_{namespace}"
    url = f"postgresql+asyncpg://postgres@127.0.0.1:5432/{database}"
    _psql(f'CREATE DATABASE "{database}"')
    try:
        migrate(url)
        yield {"namespace": namespace, "database_url": url}
    finally:
        await remove_namespace(make_settings(namespace=namespace))
        _psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
