"""What an operator reads first (docs/dashboard.md#overview): jobs by status and type, the last hour per minute, run
time and queue wait per type, the DLQ's trend and the endpoints failing now; a client's own, an admin's all.

Every figure is read from the database by a statement over an index (stores/overview.py), three shares on
connections of their own at once. Counting every job by type and status scans an entry per job (400 ms at a
million on this machine), so that share is kept per scope and recounted in the background at most every
BY_TYPE_SECONDS; the live and dead jobs by status are counted at every answer (few entries). The minutes of the
last hour that have settled are kept, not read again (services/last_hour.py). The whole answer is kept
`OVERVIEW_CACHE_SECONDS` per caller's scope. Nothing is added to the submit, claim or finish paths."""

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import Names
from app.core.statuses import TERMINAL, JobStatus
from app.models.types import utcnow
from app.services.failing_endpoints import failing_endpoints
from app.services.fresh_for import FreshFor, KeptAndRefreshed
from app.services.last_hour import SERIES, LastHour
from app.services.tenancy import Principal
from app.stores import overview as figures

S = JobStatus
HOURS = 24  # the DLQ's trend: the current hour and the 23 before it
SAMPLE = 500  # the latest runs per type that its percentiles are computed from
FAILED = (S.RETRYING, S.DEAD_LETTERED)
# Read at every answer; the finished jobs by type (most of the table) are counted at most every BY_TYPE_SECONDS.
FRESH = tuple(str(status) for status in S if status not in TERMINAL or status == S.DEAD_LETTERED)
BY_TYPE_SECONDS = 30.0


@dataclass
class OverviewService:
    engine: AsyncEngine
    redis: Redis
    names: Names
    cache_seconds: float
    cache: FreshFor[dict[str, Any]] = field(init=False)
    last_hour: LastHour = field(default_factory=LastHour)
    by_type: KeptAndRefreshed[dict[str, Any]] = field(default_factory=lambda: KeptAndRefreshed(BY_TYPE_SECONDS))

    def __post_init__(self) -> None:
        self.cache = FreshFor(self.cache_seconds)

    async def read(self, principal: Principal) -> dict[str, Any]:
        """The overview of the jobs `principal` sees, at most `cache_seconds` old."""
        scope = principal.scope
        return await self.cache.get(scope, lambda: self._compute(scope))

    async def _compute(self, scope: str | None) -> dict[str, Any]:
        now = utcnow()
        # on connections of their own: the answer takes the longest share, not the sum
        (by_type, _), fresh, (minutes, dlq, endpoints) = await asyncio.gather(
            self.by_type.get(scope, lambda: self._by_type(scope)), self._fresh(scope), self._recent(scope, now)
        )
        counts = sum(by_type["counts"].values(), Counter[str]())
        for status in FRESH:  # live and dead: read now
            counts[status] = fresh.get(status, 0)
        dead = counts[S.DEAD_LETTERED]
        return {
            "generated_at": now,
            "fresh_for_seconds": self.cache_seconds,
            "counts": {str(status): counts[status] for status in S},
            "by_type": [
                {"job_type": t, "counts": {str(s): c[s] for s in S if c[s]}}
                for t, c in sorted(by_type["counts"].items())
            ],
            "by_type_at": by_type["at"],
            "throughput": _throughput(minutes),
            "timings": by_type["timings"],
            "dlq": {**dlq, "size": dead, "an_hour_ago": max(0, dead - dlq["last_hour"])},
            "failing_endpoints": endpoints,
        }

    async def _by_type(self, scope: str | None) -> dict[str, Any]:
        """Counts by type and status (a scan of the scope's index entries) and each type's timings."""
        now = utcnow()
        async with self.engine.connect() as conn:
            by_type: dict[str, Counter[str]] = {}
            for status, job_type, n in await figures.status_type_counts(conn, scope):
                by_type.setdefault(job_type, Counter())[status] += n
            timings = [await _timings(conn, scope, job_type, now) for job_type in sorted(by_type)]
        return {"at": now, "counts": by_type, "timings": timings}

    async def _fresh(self, scope: str | None) -> dict[str, int]:
        """The live and dead jobs by status, read at every answer: few index entries, whatever the table holds."""
        async with self.engine.connect() as conn:
            return {status: n for status, n in await figures.status_counts(conn, scope, FRESH)}

    async def _recent(
        self, scope: str | None, now: datetime
    ) -> tuple[list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
        """The last hour per minute, the DLQ's last day, the endpoints failing now."""
        async with self.engine.connect() as conn:
            minutes = await self.last_hour.read(conn, scope, now)
            dlq = await _dlq(conn, scope, now)
            endpoints = await failing_endpoints(conn, self.redis, self.names, scope, now)
        return minutes, dlq, endpoints


def _throughput(minutes: list[dict[str, Any]]) -> dict[str, Any]:
    """The minutes, with the failure rate of the hour and of each minute: failed attempts (retried or
    dead-lettered) over the attempts that ended (those and the successes); None when none ended."""
    for minute in minutes:
        minute["failure_rate"] = _rate(minute)
    hour = {key: sum(m[key] for m in minutes) for key in SERIES}
    return {"bucket_seconds": 60, "minutes": minutes, "last_hour": {**hour, "failure_rate": _rate(hour)}}


def _rate(figures_: dict[str, Any]) -> float | None:
    failed = sum(figures_[str(status)] for status in FAILED)
    ended = failed + figures_[str(S.SUCCEEDED)]
    return round(failed / ended, 4) if ended else None


async def _timings(conn: AsyncConnection, scope: str | None, job_type: str, now: datetime) -> dict[str, Any]:
    """p50/p95 of run time (finished - started, the last run) and queue wait (started - max(created, run_at)),
    in seconds, over the last `SAMPLE` runs of the type that finished in the last hour."""
    rows = await figures.latest_runs(conn, scope, job_type, now - timedelta(hours=1), SAMPLE)
    runs = sorted((r.finished_at - r.started_at).total_seconds() for r in rows)
    waits = sorted(max(0.0, (r.started_at - max(r.created_at, r.run_at or r.created_at)).total_seconds()) for r in rows)
    return {
        "job_type": job_type,
        "sample": len(rows),
        "run_p50": percentile(runs, 50),
        "run_p95": percentile(runs, 95),
        "wait_p50": percentile(waits, 50),
        "wait_p95": percentile(waits, 95),
    }


def percentile(ordered: list[float], p: float) -> float | None:
    """The nearest-rank percentile of sorted values (None for none)."""
    if not ordered:
        return None
    rank = max(1, -(-len(ordered) * p // 100))  # ceil(n * p / 100)
    return round(ordered[int(rank) - 1], 6)


async def _dlq(conn: AsyncConnection, scope: str | None, now: datetime) -> dict[str, Any]:
    """The jobs dead-lettered per hour over the last day (those dead still), and in the last 60 minutes; the size
    an hour ago is the size now less these (replays in the hour aside)."""
    first = int(now.timestamp()) // 3600 - HOURS + 1
    counts = {hour: n for hour, n in await figures.dead_per_hour(conn, scope, _at(first, 3600))}
    recent = await figures.dead_per_hour(conn, scope, now - timedelta(hours=1))
    return {
        "last_hour": sum(n for _, n in recent),
        "hourly": [{"at": _at(h, 3600), "dead_lettered": counts.get(h, 0)} for h in range(first, first + HOURS)],
    }


def _at(bucket: int, seconds: int) -> datetime:
    return datetime.fromtimestamp(bucket * seconds, UTC)
