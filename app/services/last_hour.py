"""The overview's last hour per minute, read incrementally: a minute that ended more than SETTLE ago is kept as
read (its jobs' creation and finish times, and the audit rows of retries, are written once), so a refresh reads
only the minutes since the last settled one instead of the whole hour again. The first read of a scope in a
process reads the hour."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.stores import overview as figures

MINUTES = 60  # the current minute and the 59 before it
SETTLE = timedelta(seconds=30)  # a job that ended in a minute is committed within this after its end
SERIES = ("submitted", "succeeded", "retrying", "dead_lettered", "cancelled")  # a minute's figures
MAX_SCOPES = 1000  # scopes kept; past this the oldest are forgotten (a dashboard open per client at most)

Minute = dict[str, int]


def minute_of(moment: datetime) -> int:
    """Whole minutes since the epoch, as stores/overview.py buckets them."""
    return int(moment.timestamp()) // 60


@dataclass
class Settled:
    minutes: dict[int, Minute] = field(default_factory=dict)
    until: int = 0  # the first minute not kept


@dataclass
class LastHour:
    """Each scope's settled minutes, kept for the hour they are shown."""

    scopes: dict[str | None, Settled] = field(default_factory=dict)

    async def read(self, conn: AsyncConnection, scope: str | None, now: datetime) -> list[dict[str, Any]]:
        """The last hour per minute, oldest first: the figures of SERIES and the minute's start."""
        first = minute_of(now) - MINUTES + 1
        kept = self.scopes.pop(scope, None) or Settled()
        self.scopes[scope] = kept  # the most recently read last, so the oldest go first
        start = max(first, kept.until)
        fresh = await _read(conn, scope, start, first + MINUTES)
        settled = minute_of(now - SETTLE)
        for minute in range(start, settled):
            kept.minutes[minute] = fresh[minute]
        kept.until = max(start, settled)
        for minute in [m for m in kept.minutes if m < first]:
            del kept.minutes[minute]
        while len(self.scopes) > MAX_SCOPES:
            del self.scopes[next(iter(self.scopes))]
        shown = range(first, first + MINUTES)
        return [{"at": _at(m), **(kept.minutes.get(m) or fresh[m])} for m in shown]


def _at(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, UTC)


async def _read(conn: AsyncConnection, scope: str | None, start: int, end: int) -> dict[int, Minute]:
    """Minutes `start` to `end` (excluded) read from the database."""
    rows = {minute: dict.fromkeys(SERIES, 0) for minute in range(start, end)}
    since = _at(start)
    for minute, n in await figures.submitted_per_minute(conn, scope, since):
        if minute in rows:
            rows[minute]["submitted"] += n
    for status, minute, n in await figures.finished_per_minute(conn, scope, since):
        if minute in rows and status in rows[minute]:
            rows[minute][status] += n
    for minute, n in await figures.retries_per_minute(conn, scope, since):
        if minute in rows:
            rows[minute]["retrying"] += n
    return rows
