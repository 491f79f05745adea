"""The webhook endpoints failing now, for the overview: an open circuit (its breaker in Redis), or a failed attempt
in the last minutes (the delivery log), each with its last error."""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.names import Names
from app.stores import overview as figures

WINDOW = timedelta(minutes=15)
LATEST_FAILURES = 1000  # the newest failed attempts read; enough to name every endpoint failing now
UNKNOWN = "unknown"  # the circuit's state when Redis cannot be read


async def failing_endpoints(
    conn: AsyncConnection, redis: Redis, names: Names, scope: str | None, now: datetime
) -> list[dict[str, Any]]:
    """The endpoints of `scope` with an open circuit or a failed attempt in the last 15 minutes, most failures
    first: id, url, circuit, failures, last_error, last_failed_at, failing_since."""
    endpoints = await figures.endpoints(conn, scope)
    attempts = await figures.failed_attempts(conn, scope, now - WINDOW, LATEST_FAILURES)
    circuits = await _circuits(redis, names, [row.id for row in endpoints])
    failures = _by_endpoint(attempts)
    failing = []
    for endpoint in endpoints:
        count, last = failures.get(endpoint.id, (0, None))
        circuit = circuits.get(endpoint.id, UNKNOWN)
        if count == 0 and circuit != "open":
            continue
        failing.append(
            {
                "id": endpoint.id,
                "url": endpoint.url,
                "active": endpoint.active,
                "circuit": circuit,
                "failures": count,
                "last_error": _error_of(last) if last is not None else endpoint.disabled_reason,
                "last_failed_at": last.created_at if last is not None else None,
                "failing_since": endpoint.failing_since,
            }
        )
    return sorted(failing, key=lambda e: (-e["failures"], e["id"]))


def _by_endpoint(attempts: Sequence[Row[Any, Any, Any, Any]]) -> dict[str, tuple[int, Row[Any, Any, Any, Any]]]:
    """Each endpoint's failed attempts counted, with its newest (the rows come newest first)."""
    seen: dict[str, tuple[int, Row[Any, Any, Any, Any]]] = {}
    for attempt in attempts:
        count, newest = seen.get(attempt.endpoint_id, (0, attempt))
        seen[attempt.endpoint_id] = (count + 1, newest)
    return seen


def _error_of(attempt: Row[Any, Any, Any, Any]) -> str:
    if attempt.error:
        return str(attempt.error)
    return f"HTTP {attempt.status_code}"


async def _circuits(redis: Redis, names: Names, endpoint_ids: list[str]) -> dict[str, str]:
    """Each endpoint's circuit, open or closed, in one round trip (core/breaker.py: opened_at > 0 is open)."""
    if not endpoint_ids:
        return {}
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for endpoint_id in endpoint_ids:
                pipe.hget(names.endpoint_breaker_key(endpoint_id), "opened_at")
            opened = await pipe.execute()
    except (RedisError, OSError) as exc:
        logger.debug("endpoint circuits unavailable: {!r}", exc)
        return {}
    return {
        endpoint_id: "open" if value and float(value) > 0 else "closed"
        for endpoint_id, value in zip(endpoint_ids, opened, strict=True)
    }
