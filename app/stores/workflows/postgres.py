"""The two counts of what follows an outcome (counts.py) on PostgreSQL, each one statement: the rows locked in id
order by the statement's own locking read (as the claim locks its jobs), then moved, RETURNING them. A fan-in's
finish batch, which moves both, so costs two statements beside its own, not seven."""

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import loads
from app.models.rows import JobRow, job_row
from app.stores import postgres, steps
from app.stores.jobs.postgres_sql import JSON_COLUMNS
from app.stores.workflows.counts import Counts

COUNT_OFF = (
    "UPDATE jobs SET deps_left = jobs.deps_left + $2::int * w.n "
    "FROM (SELECT jobs.id, e.n FROM jobs JOIN (SELECT job_id, count(*)::int AS n FROM job_dependencies "
    "WHERE depends_on_id = ANY($1::varchar[]) GROUP BY job_id) AS e ON e.job_id = jobs.id "
    "WHERE " + steps.RELEASE.sql_guard() + " ORDER BY jobs.id FOR UPDATE OF jobs) AS w "
    "WHERE jobs.id = w.id AND " + steps.RELEASE.sql_guard() + " RETURNING jobs.*"
)
TALLY = (
    "UPDATE workflows SET unfinished = workflows.unfinished - v.n, updated_at = $3 "
    "FROM (SELECT workflows.id, v.n FROM workflows JOIN unnest($1::varchar[], $2::int[]) AS v(id, n) "
    "ON v.id = workflows.id ORDER BY workflows.id FOR UPDATE OF workflows) AS v "
    "WHERE workflows.id = v.id RETURNING workflows.*"
)


class PgCounts(Counts):
    async def count_off(self, conn: AsyncConnection, parents: list[str], by: int) -> list[JobRow]:
        rows = await postgres.rows(conn, COUNT_OFF, (sorted(set(parents)), by))
        return [job_row(_parsed(dict(row))) for row in rows]

    async def tally(self, conn: AsyncConnection, ended: dict[str, int], now: datetime) -> list[dict[str, Any]]:
        ids = sorted(ended)
        rows = await postgres.rows(conn, TALLY, (ids, [ended[i] for i in ids], now))
        return [dict(row) for row in rows]


def _parsed(row: dict[str, Any]) -> dict[str, Any]:
    """A jobs row as the driver gave it, its JSON columns (text here) parsed."""
    for name in JSON_COLUMNS:
        if isinstance(row[name], str):
            row[name] = loads(row[name])
    return row
