"""What an operator reads first (docs/dashboard.md#overview): jobs by status and type, the last hour per minute, run
time and queue wait per type, the DLQ's trend and the endpoints failing now; a client's own, an admin's all.

Every figure is read from the database by a statement over an index (stores/overview.py), and the whole answer is
kept `OVERVIEW_CACHE_SECONDS` per caller's scope, so dashboards left open cost one read per scope every few
seconds. Nothing is added to the submit, claim or finish paths."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import Names
from app.core.statuses import JobStatus
from app.models.types import utcnow
from app.services.failing_endpoints import failing_endpoints
from app.services.fresh_for import FreshFor
from app.services.tenancy import Principal
from app.stores import overview as figures

S = JobStatus
MINUTES = 60  # the throughput chart's buckets: the current minute and the 59 before it
HOURS = 24  # the DLQ's trend: the current hour and the 23 before it
SAMPLE = 500  # the latest runs per type that its percentiles are computed from
FAILED = (S.RETRYING, S.DEAD_LETTERED)
SERIES = ("submitted", "succeeded", "retrying", "dead_lettered", "cancelled")  # a minute's figures


@dataclass
class OverviewService:
    engine: AsyncEngine
    redis: Redis
    names: Names
    cache_seconds: float
    cache: FreshFor[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.cache = FreshFor(self.cache_seconds)

    async def read(self, principal: Principal) -> dict[str, Any]:
        """The overview of the jobs `principal` sees, at most `cache_seconds` old."""
        scope = principal.scope
        return await self.cache.get(scope, lambda: self._compute(scope))

    async def _compute(self, scope: str | None) -> dict[str, Any]:
        now = utcnow()
        async with self.engine.connect() as conn:
            counts = await figures.status_type_counts(conn, scope)
            by_type: dict[str, Counter[str]] = {}
            for status, job_type, n in counts:
                by_type.setdefault(job_type, Counter())[status] += n
            totals = sum(by_type.values(), Counter[str]())
            minutes = await _minutes(conn, scope, now)
            timings = [await _timings(conn, scope, job_type, now) for job_type in sorted(by_type)]
            dlq = await _dlq(conn, scope, now, totals[S.DEAD_LETTERED])
            endpoints = await failing_endpoints(conn, self.redis, self.names, scope, now)
        return {
            "generated_at": now,
            "fresh_for_seconds": self.cache_seconds,
            "counts": {str(status): totals[status] for status in S},
            "by_type": [
                {"job_type": t, "counts": {str(s): c[s] for s in S if c[s]}} for t, c in sorted(by_type.items())
            ],
            "throughput": _throughput(minutes),
            "timings": timings,
            "dlq": dlq,
            "failing_endpoints": endpoints,
        }


def _minute_of(moment: datetime) -> int:
    return int(moment.timestamp()) // 60


def _at(bucket: int, seconds: int) -> datetime:
    return datetime.fromtimestamp(bucket * seconds, UTC)


async def _minutes(conn: AsyncConnection, scope: str | None, now: datetime) -> list[dict[str, Any]]:
    """The last hour per minute, oldest first: submitted, and each outcome of a run."""
    first = _minute_of(now) - MINUTES + 1
    since = _at(first, 60)
    rows = {minute: dict.fromkeys(SERIES, 0) for minute in range(first, first + MINUTES)}
    for minute, n in await figures.submitted_per_minute(conn, scope, since):
        if minute in rows:
            rows[minute]["submitted"] += n
    for status, minute, n in await figures.finished_per_minute(conn, scope, since):
        if minute in rows and status in rows[minute]:
            rows[minute][status] += n
    for minute, n in await figures.retries_per_minute(conn, scope, since):
        if minute in rows:
            rows[minute]["retrying"] += n
    return [{"at": _at(minute, 60), **row} for minute, row in rows.items()]


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


async def _dlq(conn: AsyncConnection, scope: str | None, now: datetime, size: int) -> dict[str, Any]:
    """The DLQ's size, its jobs dead-lettered per hour over the last day (those dead still), and its size an hour
    ago as far as the database knows it (now, less the jobs dead-lettered in the last hour and dead still)."""
    first = int(now.timestamp()) // 3600 - HOURS + 1
    counts = {hour: n for hour, n in await figures.dead_per_hour(conn, scope, _at(first, 3600))}
    recent = await figures.dead_per_hour(conn, scope, now - timedelta(hours=1))
    last_hour = sum(n for _, n in recent)
    return {
        "size": size,
        "last_hour": last_hour,
        "an_hour_ago": max(0, size - last_hour),
        "hourly": [{"at": _at(h, 3600), "dead_lettered": counts.get(h, 0)} for h in range(first, first + HOURS)],
    }
