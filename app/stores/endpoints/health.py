"""The statements that track an endpoint's health and disable it: a few per record batch, whatever its size,
portable (rendered for MSSQL too)."""

from collections.abc import Mapping, Sequence
from datetime import datetime

from sqlalchemy import Select, Update, or_, select, update

from app.models.setwise import per_row
from app.models.tables import ENDPOINTS


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


def disable(reasons: Mapping[str, str], gone: Sequence[str], cutoff: datetime, now: datetime) -> Update:
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
