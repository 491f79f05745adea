"""An endpoint's health over the last hour or day: its deliveries by status, its attempts' success rate and
latency, its last error, its circuit and what it has in flight. Every figure reads the deliveries made in the
window (by `ix_deliveries_endpoint_created`, migration 0018) and their attempts, so a call costs what the window
holds, not what the endpoint ever sent."""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.statuses import DeliveryStatus
from app.models.tables import ATTEMPTS, DELIVERIES
from app.models.types import utcnow
from app.services.endpoint_circuits import EndpointCircuits

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24)}
PERCENTILES = (("p50", 0.5), ("p95", 0.95))


@dataclass(frozen=True)
class WebhookStats:
    """Reads one endpoint's figures; the caller has checked that the endpoint is theirs."""

    engine: AsyncEngine
    circuits: EndpointCircuits

    async def of(self, endpoint_id: str, window: str) -> dict[str, Any]:
        """The endpoint's figures over `window` (a key of WINDOWS), as `WebhookStatsOut` holds them."""
        since = utcnow() - WINDOWS[window]
        async with self.engine.connect() as conn:
            counts = await _by_status(conn, endpoint_id, since)
            attempts = await _attempts(conn, endpoint_id, since)
            last_error = await _last_error(conn, attempts)
            in_flight = await _in_flight(conn, endpoint_id)
        succeeded = sum(1 for attempt in attempts if _ok(attempt.status_code))
        durations = sorted(attempt.duration_ms for attempt in attempts)
        return {
            "window": window,
            "deliveries": sum(counts.values()),
            **{str(status): counts.get(status, 0) for status in DeliveryStatus},
            "attempts": len(attempts),
            "success_rate": round(succeeded / len(attempts), 4) if attempts else None,
            "latency_ms": {name: _nearest_rank(durations, p) for name, p in PERCENTILES},
            "last_error": last_error,
            "circuit": await self.circuits.state(endpoint_id),
            "in_flight": in_flight,
        }


def _ok(status_code: int | None) -> bool:
    return status_code is not None and 200 <= status_code < 300


def _nearest_rank(ordered: Sequence[float], p: float) -> float | None:
    if not ordered:
        return None
    return round(float(ordered[max(math.ceil(p * len(ordered)) - 1, 0)]), 1)


def _in_window(endpoint_id: str, since: datetime) -> Any:
    return and_(DELIVERIES.c.endpoint_id == endpoint_id, DELIVERIES.c.created_at >= since)


async def _by_status(conn: AsyncConnection, endpoint_id: str, since: datetime) -> dict[str, int]:
    query = select(DELIVERIES.c.status, func.count()).where(_in_window(endpoint_id, since))
    rows = await conn.execute(query.group_by(DELIVERIES.c.status))
    return {status: count for status, count in rows.all()}


async def _attempts(conn: AsyncConnection, endpoint_id: str, since: datetime) -> Sequence[Row[Any, Any, Any, Any]]:
    """The attempts of the deliveries made in the window (each made at or after its delivery, so in it too): one
    read of the narrow columns every figure is computed from (portable: SQLite has no percentile function)."""
    joined = ATTEMPTS.join(DELIVERIES, ATTEMPTS.c.delivery_id == DELIVERIES.c.id)
    columns = (ATTEMPTS.c.id, ATTEMPTS.c.created_at, ATTEMPTS.c.status_code, ATTEMPTS.c.duration_ms)
    return (await conn.execute(select(*columns).select_from(joined).where(_in_window(endpoint_id, since)))).all()


async def _last_error(conn: AsyncConnection, attempts: Sequence[Row[Any, Any, Any, Any]]) -> dict[str, Any] | None:
    failed = [attempt for attempt in attempts if not _ok(attempt.status_code)]
    if not failed:
        return None
    last = max(failed, key=lambda attempt: (attempt.created_at, attempt.id))
    error = (await conn.execute(select(ATTEMPTS.c.error).where(ATTEMPTS.c.id == last.id))).scalar_one_or_none()
    return {"at": last.created_at, "status_code": last.status_code, "error": error}


async def _in_flight(conn: AsyncConnection, endpoint_id: str) -> int:
    """Deliveries not yet settled, whenever made: waiting for an attempt or a retry, or being sent now."""
    pending = and_(DELIVERIES.c.endpoint_id == endpoint_id, DELIVERIES.c.status == DeliveryStatus.PENDING)
    return int((await conn.execute(select(func.count()).where(pending))).scalar_one())
