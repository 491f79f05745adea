"""Disabling a webhook endpoint for good: one that answered 410 Gone, or that has failed every attempt for longer
than the bound. Its breaker only pauses an endpoint; this rule, in the database, disables it."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from loguru import logger
from sqlalchemy.ext.asyncio import AsyncConnection

from app.stores.endpoints import EndpointStore


@dataclass(frozen=True)
class EndpointResult:
    endpoint_id: str
    ok: bool
    gone: bool  # the endpoint answered 410 Gone


async def judge_endpoints(
    endpoints: EndpointStore,
    conn: AsyncConnection,
    results: Sequence[EndpointResult],
    now: datetime,
    disable_after_seconds: float,
) -> list[tuple[str, str]]:
    """Track how long each endpoint has failed everything; disable those gone (410) or failing too long. A
    few statements per batch, whatever its size, in `conn`'s transaction; returns (endpoint id, reason) for those
    disabled now."""
    last = {result.endpoint_id: result.ok for result in results}  # an endpoint's last result decides
    healthy = [endpoint for endpoint, ok in last.items() if ok]
    failing = [endpoint for endpoint, ok in last.items() if not ok]
    gone = list(dict.fromkeys(result.endpoint_id for result in results if result.gone))
    reasons = {endpoint: f"the endpoint answered 410 Gone at {_stamp(now)}" for endpoint in gone}
    cutoff = now - timedelta(seconds=disable_after_seconds)
    if healthy:
        await endpoints.clear_failing(conn, healthy)
    if failing:
        await endpoints.mark_failing(conn, failing, now)
        for endpoint, since in await endpoints.failing_since(conn, failing, cutoff):
            reasons.setdefault(endpoint, f"every attempt failed from {_stamp(since)} to {_stamp(now)}")
    if not reasons:
        return []
    disabled = await endpoints.disable(conn, reasons, gone, cutoff, now)
    judged = [(endpoint, reasons[endpoint]) for endpoint in last if endpoint in disabled]
    for endpoint, reason in judged:
        logger.warning("webhook endpoint {} disabled: {}", endpoint, reason)
    return judged


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")
