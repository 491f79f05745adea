"""An endpoint's stats read on PostgreSQL and SQLite alike, and its circuit read (never moved) from the breaker the
webhook workers run, through its states."""

import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from redis.asyncio import Redis
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.breaker import endpoint_policy
from app.core.names import Names
from app.core.redis_batch import RedisBatch
from app.models.tables import ATTEMPTS, DELIVERIES
from app.models.types import utcnow
from app.services.endpoint_circuits import EndpointCircuits
from app.services.webhook_stats import WebhookStats
from app.workers.webhooks.breakers import EndpointBreakers, Result
from tests.conftest import NS
from tests.support import make_delivery

NAMES = Names(NS)
POLICY = endpoint_policy(failures=2, cooldown_seconds=10, lease_seconds=30)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def batch(redis: Redis) -> AsyncIterator[RedisBatch]:
    running = RedisBatch(redis)
    try:
        yield running
    finally:
        await running.close()


async def test_the_figures_are_the_same_on_every_database(engine: AsyncEngine, batch: RedisBatch) -> None:
    endpoint = str(uuid.uuid4())
    now = utcnow()
    # (minutes ago, status, the attempts' (status code, ms)); the last is outside the hour
    made = [
        (1, "succeeded", [(200, 10.0)]),
        (2, "failed", [(500, 30.0), (None, 2000.0)]),
        (3, "pending", [(503, 20.0)]),
        (4, "succeeded", [(500, 40.0), (204, 50.0)]),
        (90, "failed", [(500, 1.0)]),
    ]
    deliveries, attempts = [], []
    for minutes, status, tries in made:
        at = now - timedelta(minutes=minutes)
        row = make_delivery(f"msg_{uuid.uuid4().hex}", "", "stats-sql", at) | {"job_id": None, "status": status}
        deliveries.append(row | {"endpoint_id": endpoint, "target": endpoint})
        for n, (code, ms) in enumerate(tries, 1):
            error = None if code and code < 300 else f"failure {minutes}.{n}"
            attempt = {"delivery_id": row["id"], "attempt": n, "status_code": code, "duration_ms": ms}
            attempts.append({**attempt, "error": error, "created_at": at + timedelta(seconds=n)})
    async with engine.begin() as conn:
        await conn.execute(insert(DELIVERIES), deliveries)
        await conn.execute(insert(ATTEMPTS), attempts)
    stats = WebhookStats(engine, EndpointCircuits(batch, NAMES, POLICY))
    hour = await stats.of(endpoint, "1h")
    assert {k: hour[k] for k in ("deliveries", "succeeded", "failed", "pending", "attempts", "in_flight")} == {
        "deliveries": 4,
        "succeeded": 2,
        "failed": 1,
        "pending": 1,
        "attempts": 6,
        "in_flight": 1,
    }
    assert hour["success_rate"] == round(2 / 6, 4)
    assert hour["latency_ms"] == {"p50": 30.0, "p95": 2000.0}  # of 10, 20, 30, 40, 50, 2000
    latest = now - timedelta(minutes=2) + timedelta(seconds=2)  # the failed delivery's second attempt
    assert hour["last_error"] == {"at": latest, "status_code": None, "error": "failure 2.2"}
    assert hour["circuit"] == "closed"
    day = await stats.of(endpoint, "24h")
    assert (day["deliveries"], day["failed"], day["attempts"]) == (5, 2, 7)


async def test_the_circuit_reads_as_the_workers_breaker_stands(redis: Redis, batch: RedisBatch) -> None:
    clock, endpoint = Clock(), f"ep-{uuid.uuid4().hex[:8]}"
    breakers = EndpointBreakers(redis, NAMES, POLICY, 4, clock)
    circuits = EndpointCircuits(batch, NAMES, POLICY, clock)
    assert await circuits.state(endpoint) == "closed"
    await breakers.done_many([Result(endpoint, "d1", False)])
    assert await circuits.state(endpoint) == "closed"  # one failure of the two that open it
    await breakers.done_many([Result(endpoint, "d2", False)])
    assert await circuits.state(endpoint) == "open"
    clock.now += 11
    assert await circuits.state(endpoint) == "half_open"
    assert await circuits.state(endpoint) == "half_open"  # reading takes no probe and changes nothing
    await breakers.done_many([Result(endpoint, "d3", True)])
    assert await circuits.state(endpoint) == "closed"
