"""The two counts of what follows an outcome (counts.py) on PostgreSQL, each one statement: the rows locked in id
order by the statement's own locking read (as the claim locks its jobs), then moved, RETURNING them. A fan-in's
finish batch, which moves both, so costs two statements beside its own, not seven."""

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.models.rows import JobRow, job_row
from app.stores import postgres, steps
from app.stores.jobs.postgres_sql import json_parsed
from app.stores.workflows.counts import Counts


def count_off(edges: str, by: str) -> str:
    """An UPDATE moving each waiting dependent's `deps_left` by `by` times its count in `edges` (SQL for the
    job_dependencies rows of the parents that count), its rows locked in id order first."""
    return (
        f"UPDATE jobs SET deps_left = jobs.deps_left + {by} * w.n "
        "FROM (SELECT jobs.id, e.n FROM jobs JOIN (SELECT job_id, count(*)::int AS n FROM job_dependencies "
        f"WHERE {edges} GROUP BY job_id) AS e ON e.job_id = jobs.id "
        "WHERE " + steps.RELEASE.sql_guard() + " ORDER BY jobs.id FOR UPDATE OF jobs) AS w "
        "WHERE jobs.id = w.id AND " + steps.RELEASE.sql_guard()
    )


def tally(ended: str, now: str) -> str:
    """An UPDATE taking `ended`'s counts (SQL for rows (id, n)) off their workflows' `unfinished`, the rows locked
    in id order first."""
    return (
        f"UPDATE workflows SET unfinished = workflows.unfinished - v.n, updated_at = {now} "
        f"FROM (SELECT workflows.id, v.n FROM workflows JOIN {ended} AS v(id, n) "
        "ON v.id = workflows.id ORDER BY workflows.id FOR UPDATE OF workflows) AS v "
        "WHERE workflows.id = v.id"
    )


COUNT_OFF = count_off("depends_on_id = ANY($1::varchar[])", "$2::int") + " RETURNING jobs.*"
TALLY = tally("unnest($1::varchar[], $2::int[])", "$3") + " RETURNING workflows.*"


class PgCounts(Counts):
    async def count_off(self, conn: AsyncConnection, parents: list[str], by: int) -> list[JobRow]:
        rows = await postgres.rows(conn, COUNT_OFF, (sorted(set(parents)), by))
        return [job_row(json_parsed(dict(row))) for row in rows]

    async def tally(self, conn: AsyncConnection, ended: dict[str, int], now: datetime) -> list[dict[str, Any]]:
        ids = sorted(ended)
        rows = await postgres.rows(conn, TALLY, (ids, [ended[i] for i in ids], now))
        return [dict(row) for row in rows]
