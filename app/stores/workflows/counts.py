"""The two counts what follows an outcome moves (follow.py): each waiting dependent's count of dependencies still to
let it go, and each workflow's count of unfinished jobs. Portable here, a statement or three each; `postgres.py`
makes each one statement."""

from collections import Counter
from datetime import datetime
from typing import Any

from sqlalchemy import Update, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.statuses import JobStatus
from app.models.rows import JobRow, job_row
from app.models.setwise import per_row
from app.models.tables import JOB_DEPENDENCIES as DEPS
from app.models.tables import JOBS, WORKFLOWS


def counted_off(steps_by_job: dict[str, int]) -> Update:
    """Each waiting job's count of dependencies still to let it go moved by its step; RETURNING the rows."""
    step = per_row(JOBS.c.id, JOBS.c.deps_left, steps_by_job)
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(sorted(steps_by_job)), JOBS.c.status == str(JobStatus.WAITING))
        .values(deps_left=JOBS.c.deps_left + step)
        .returning(*JOBS.c)
    )


def tallied(ended: dict[str, int], now: datetime) -> Update:
    """Each workflow's count of unfinished jobs less the jobs of it that ended (a replayed one counts -1)."""
    left = WORKFLOWS.c.unfinished - per_row(WORKFLOWS.c.id, WORKFLOWS.c.unfinished, ended)
    return update(WORKFLOWS).where(WORKFLOWS.c.id.in_(sorted(ended))).values(unfinished=left, updated_at=now)


class Counts:
    async def count_off(self, conn: AsyncConnection, parents: list[str], by: int) -> list[JobRow]:
        """Each waiting dependent of `parents` counts them off (`by` -1) or back on (+1), locked in id order, as
        every transaction takes them (so no two deadlock on them): the rows after."""
        edges = await conn.execute(select(DEPS.c.job_id).where(DEPS.c.depends_on_id.in_(sorted(set(parents)))))
        counts = Counter(row.job_id for row in edges)
        if not counts:
            return []
        children = sorted(counts)
        await conn.execute(select(JOBS.c.id).where(JOBS.c.id.in_(children)).order_by(JOBS.c.id).with_for_update())
        moved = await conn.execute(counted_off({child: by * counts[child] for child in children}))
        return [job_row(row._mapping) for row in moved]

    async def tally(self, conn: AsyncConnection, ended: dict[str, int], now: datetime) -> list[dict[str, Any]]:
        """Each workflow's count of unfinished jobs less `ended`'s, locked in id order first: the rows after."""
        ids = sorted(ended)
        await conn.execute(
            select(WORKFLOWS.c.id).where(WORKFLOWS.c.id.in_(ids)).order_by(WORKFLOWS.c.id).with_for_update()
        )
        await conn.execute(tallied(ended, now))
        rows = await conn.execute(select(WORKFLOWS).where(WORKFLOWS.c.id.in_(ids)))
        return [dict(row._mapping) for row in rows]
