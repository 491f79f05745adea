"""Disabling a webhook endpoint for good: one that answered 410 Gone, or that has failed every attempt for longer
than the bound. Its breaker only pauses an endpoint; this rule, in the database, disables it."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from loguru import logger
from sqlalchemy import Select, Update, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.models.setwise import per_row
from app.models.tables import ENDPOINTS


@dataclass(frozen=True)
class EndpointResult:
    endpoint_id: str
    ok: bool
    gone: bool  # the endpoint answered 410 Gone


async def judge_endpoints(
    conn: AsyncConnection, results: Sequence[EndpointResult], now: datetime, disable_after_seconds: float
) -> list[tuple[str, str]]:
    """Track how long each endpoint has failed everything; disable those gone (410) or failing too long. A
    few statements per batch, whatever its size; returns (endpoint id, reason) for those disabled now."""
    last = {result.endpoint_id: result.ok for result in results}  # an endpoint's last result decides
    healthy = [endpoint for endpoint, ok in last.items() if ok]
    failing = [endpoint for endpoint, ok in last.items() if not ok]
    gone = list(dict.fromkeys(result.endpoint_id for result in results if result.gone))
    reasons = {endpoint: f"the endpoint answered 410 Gone at {_stamp(now)}" for endpoint in gone}
    cutoff = now - timedelta(seconds=disable_after_seconds)
    if healthy:
        await conn.execute(clear_failing(healthy))
    if failing:
        await conn.execute(mark_failing(failing, now))
        for endpoint, since in (await conn.execute(failing_too_long(failing, cutoff))).all():
            reasons.setdefault(endpoint, f"every attempt failed from {_stamp(since)} to {_stamp(now)}")
    if not reasons:
        return []
    disabled = set((await conn.execute(disable(reasons, gone, cutoff, now))).scalars())
    judged = [(endpoint, reasons[endpoint]) for endpoint in last if endpoint in disabled]
    for endpoint, reason in judged:
        logger.warning("webhook endpoint {} disabled: {}", endpoint, reason)
    return judged


def clear_failing(endpoint_ids: Sequence[str]) -> Update:
    """A success ends the failing period."""
    return (
        update(ENDPOINTS)
        .where(ENDPOINTS.c.id.in_(endpoint_ids), ENDPOINTS.c.failing_since.is_not(None))
        .values(failing_since=None)
    )


def mark_failing(endpoint_ids: Sequence[str], now: datetime) -> Update:
    """A failure starts the failing period, unless one is running."""
    return (
        update(ENDPOINTS)
        .where(ENDPOINTS.c.id.in_(endpoint_ids), ENDPOINTS.c.failing_since.is_(None))
        .values(failing_since=now)
    )


def failing_too_long(endpoint_ids: Sequence[str], cutoff: datetime) -> Select[str, datetime]:
    """The active endpoints among these that have failed everything since `cutoff` or before."""
    # The bare column, not `active IS true`: MSSQL would get `IS 1`, which it refuses.
    return select(ENDPOINTS.c.id, ENDPOINTS.c.failing_since).where(
        ENDPOINTS.c.id.in_(endpoint_ids), ENDPOINTS.c.active, ENDPOINTS.c.failing_since <= cutoff
    )


def disable(reasons: dict[str, str], gone: Sequence[str], cutoff: datetime, now: datetime) -> Update:
    """Disable each active endpoint with its reason, RETURNING the ids it disabled. One not gone must still be
    failing since `cutoff`: it may have been re-enabled since we looked."""
    still_failing = ENDPOINTS.c.failing_since <= cutoff
    return (
        update(ENDPOINTS)
        .where(ENDPOINTS.c.id.in_(list(reasons)), ENDPOINTS.c.active)
        .where(or_(ENDPOINTS.c.id.in_(gone), still_failing) if gone else still_failing)
        .values(active=False, disabled_reason=per_row(ENDPOINTS.c.id, ENDPOINTS.c.disabled_reason, reasons))
        .values(updated_at=now)
        .returning(ENDPOINTS.c.id)
    )


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")
