"""The bench's own world: a fresh PostgreSQL database, a namespace, settings for subprocesses, and the cleanup.

Everything the bench creates is named after one run id, so it can share PostgreSQL, RabbitMQ and Redis with a
`make run` or a test run, and `cleanup()` removes exactly that: the database, the namespace's queues and
exchanges (the service's topology and the bench's own), and the namespace's Redis keys.
"""

import asyncio
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import asyncpg  # type: ignore[import-untyped]
from cryptography.fernet import Fernet
from redis.asyncio import Redis

from app.core.config import Settings
from app.core.topology import build_topology

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qc"]
RABBITMQ_URL = "amqp://guest:guest@127.0.0.1:5672/"
REDIS_URL = "redis://127.0.0.1:6379/0"

# What every bench process runs with, on top of the service's defaults (the header of the table lists them).
BENCH_SETTINGS: dict[str, Any] = {
    "rate_limit_per_minute": 1_000_000_000,
    "log_level": "WARNING",
    "webhook_allow_private_networks": True,
    "embedded_workers": False,
}
SECRET_SETTINGS = ("admin_api_key", "secret_encryption_key")

# The bench's own broker names (inside the namespace, so cleanup finds them): the baseline API publishes here.
BASELINE_EXCHANGE = "bench.baseline"
RAW_PUBLISH_QUEUE = "bench.raw-publish"
BASELINE_TABLE = "bench_baseline_jobs"
# The baselines' queues are lazy, as the service's lanes are (app/core/topology.py), so that their ratios compare
# the code and not the broker's queue mode (a long classic queue that is not lazy stalls the broker's confirms).
BASELINE_QUEUE_ARGS = {"x-queue-mode": "lazy"}


@dataclass
class BenchEnv:
    """One bench run's database, namespace and keys."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    admin_key: str = field(default_factory=lambda: "tq_bench_" + uuid.uuid4().hex)
    encryption_key: str = field(default_factory=lambda: Fernet.generate_key().decode())
    created: bool = False
    queue_type: str = "classic"  # QUEUE_TYPE; a quorum topology lives in a namespace of its own (see `namespace`)
    # Queues and exchanges a scenario declared besides the service's topology and the bench's own names (the
    # peers' queues): cleanup deletes them too.
    extra_queues: set[str] = field(default_factory=set)
    extra_exchanges: set[str] = field(default_factory=set)

    @property
    def namespace(self) -> str:
        """Queues of one name cannot change their type, so a quorum run of the same bench gets its own names."""
        return f"bench{self.run_id}" + ("q" if self.queue_type == "quorum" else "")

    @property
    def db_name(self) -> str:
        return f"taskq_bench_{self.run_id}"

    @property
    def database_url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:5432/{self.db_name}"

    @property
    def dsn(self) -> str:
        """The same database for asyncpg."""
        return f"postgresql://postgres@127.0.0.1:5432/{self.db_name}"

    @property
    def baseline_exchange(self) -> str:
        return f"{self.namespace}.{BASELINE_EXCHANGE}"

    @property
    def raw_publish_queue(self) -> str:
        return f"{self.namespace}.{RAW_PUBLISH_QUEUE}"

    def settings(self, **overrides: Any) -> Settings:
        """The service's settings for a bench process; `.env` is never read."""
        values = {
            "database_url": self.database_url,
            "rabbitmq_url": RABBITMQ_URL,
            "redis_url": REDIS_URL,
            "namespace": self.namespace,
            "queue_type": self.queue_type,
            "admin_api_key": self.admin_key,
            "secret_encryption_key": self.encryption_key,
            **BENCH_SETTINGS,
            **overrides,
        }
        return Settings(_env_file=None, **values)

    def process_env(self, **overrides: Any) -> dict[str, str]:
        """Every setting as an environment variable, so neither `.env` nor the caller's shell decides anything."""
        env = {k: v for k, v in os.environ.items() if not k.isupper() or k in ("PATH", "HOME", "LANG", "TMPDIR")}
        for name, value in self.settings(**overrides).model_dump().items():
            if value is not None:
                env[name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
        env["PYTHONPATH"] = str(ROOT)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def shown_settings(self, **overrides: Any) -> dict[str, str]:
        """The settings that differ from the service's defaults, secrets masked: for the table's header."""
        defaults = Settings(_env_file=None)
        chosen = self.settings(**overrides)
        shown = {}
        for name, value in chosen.model_dump().items():
            if value == getattr(defaults, name):
                continue
            if name in SECRET_SETTINGS:
                value = "(set)"
            elif name == "database_url":
                value = "postgresql+asyncpg://postgres@127.0.0.1:5432/(fresh database)"
            elif name == "namespace":
                value = "bench<run id>"
            shown[name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
        return shown

    # -- life cycle -------------------------------------------------------------------------------------------
    def create(self) -> None:
        """Create the database and migrate it with `python -m app migrate`, as an operator would."""
        _psql(f'CREATE DATABASE "{self.db_name}"')
        self.created = True
        result = subprocess.run(
            [sys.executable, "-m", "app", "migrate"],
            env=self.process_env(),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(f"python -m app migrate failed:\n{result.stderr[-2000:]}")

    async def reset(self) -> None:
        """Empty the job tables and every queue of the namespace between scenarios (no process may be running)."""
        conn = await asyncpg.connect(self.dsn)
        try:
            await conn.execute(
                "TRUNCATE jobs, job_events, outbox, deliveries, delivery_attempts RESTART IDENTITY CASCADE"
            )
            for table in (BASELINE_TABLE, "workflows"):  # workflows: on a service that has them
                if await conn.fetchval("SELECT to_regclass($1)", table):
                    await conn.execute(f"TRUNCATE {table} CASCADE")
        finally:
            await conn.close()
        await self.purge_queues()

    async def purge_queues(self) -> None:
        connection = await aio_pika.connect(RABBITMQ_URL)
        async with connection:
            channel = await connection.channel()
            for queue in self.settings_topology().queues:
                try:
                    declared = await channel.declare_queue(queue.name, passive=True)
                except aio_pika.exceptions.AMQPError:
                    channel = await connection.channel()  # not declared yet: nothing to purge
                    continue
                await declared.purge()

    def settings_topology(self) -> Any:
        return build_topology(self.settings())

    async def cleanup(self) -> list[str]:
        """Remove everything this run created; returns what could not be removed (never raises)."""
        problems: list[str] = []
        for step in (self._drop_broker_names, self._drop_redis_keys):
            try:
                await asyncio.wait_for(step(), 60)
            except Exception as exc:
                problems.append(f"{step.__name__}: {type(exc).__name__}: {exc}")
        if self.created:
            try:
                _psql(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
                self.created = False
            except Exception as exc:
                problems.append(f"drop database: {exc}")
        return problems

    async def _drop_broker_names(self) -> None:
        topology = self.settings_topology()
        connection = await aio_pika.connect(RABBITMQ_URL)
        async with connection:
            channel = await connection.channel()
            own = [self.baseline_exchange, self.raw_publish_queue]
            for queue in [*(q.name for q in topology.queues), *own, *sorted(self.extra_queues)]:
                await channel.queue_delete(queue)
            for exchange in [
                *(e.name for e in topology.exchanges),
                self.baseline_exchange,
                *sorted(self.extra_exchanges),
            ]:
                await channel.exchange_delete(exchange)

    async def _drop_redis_keys(self) -> None:
        redis = Redis.from_url(REDIS_URL)
        try:
            keys = [key async for key in redis.scan_iter(match=f"{self.namespace}:*", count=1000)]
            for start in range(0, len(keys), 1000):
                await redis.delete(*keys[start : start + 1000])
        finally:
            await redis.aclose()


def _psql(sql: str) -> None:
    subprocess.run([*PG_ADMIN, sql], check=True, capture_output=True, timeout=120)
