"""Unique jobs (docs/job-types.md, "Unique jobs"): while a job of a client with a unique key holds it, a submit
with that key saves nothing and answers with that job, whatever its request.

A job holds its key while it is not terminal, or was created less than its window ago. The filtered unique index
on (client_id, unique_live) is the net under concurrent submits, as for idempotency keys: two submits of one key
make one job, and the later one finds it after its IntegrityError. A key is released by clearing `unique_live`
of a job found past both, by a compare-and-set on its terminal status (its window is fixed at its submit): whoever
does it first, the release is the same, and a job once released never takes its key back. So the finish path
writes nothing for it, and a submit without a unique key pays no statement."""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, Update, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.statuses import TERMINAL
from app.models.rows import JobRow, job_row
from app.models.tables import JOBS
from app.models.types import utcnow
from app.services.submit import Draft

Slot = tuple[str, str]  # (client id, unique key)


def slot(draft: Draft) -> Slot | None:
    """The (client, unique key) a draft would hold; None for a job without a unique key."""
    return None if draft.unique is None else (draft.job["client_id"], draft.unique)


def holds(job: JobRow, now: datetime) -> bool:
    """Whether a job holding a unique key still does: not terminal, or within the window it was submitted with."""
    if job["status"] not in TERMINAL:
        return True
    window = job["unique_seconds"]
    return window is not None and job["created_at"] + timedelta(seconds=window) > now


def repeated(drafts: Sequence[Draft], repeats: dict[int, int]) -> dict[int, int]:
    """Items of one request whose unique key an earlier item (not itself a repeat) has: index -> that item's."""
    first: dict[Slot, int] = {}
    found: dict[int, int] = {}
    for draft in drafts:
        taken = slot(draft)
        if taken is None or draft.index in repeats:
            continue
        earlier = first.setdefault(taken, draft.index)
        if earlier != draft.index:
            found[draft.index] = earlier
    return found


class UniqueHeld(Exception):
    """An item whose unique key is held where no other job can stand in for it (a workflow's): `holder` says by
    what, "job <id>" or "item <index>" of the same request."""

    def __init__(self, draft: Draft, holder: str) -> None:
        super().__init__(draft.unique)
        self.key, self.index, self.holder = draft.unique or "", draft.index, holder


async def holders(engine: AsyncEngine, drafts: Sequence[Draft]) -> dict[int, JobRow]:
    """The jobs that hold these drafts' unique keys (index -> job), keys held no longer released; no statement
    when no draft has a unique key."""
    if not any(slot(d) for d in drafts):
        return {}
    async with engine.connect() as conn:
        found = await holders_in(conn, drafts)
        await conn.commit()
    return {d.index: found[taken] for d in drafts if (taken := slot(d)) in found}


async def free(conn: AsyncConnection, drafts: Sequence[Draft]) -> list[Draft]:
    """The drafts whose unique keys no job holds, nor an earlier draft of theirs, in the caller's transaction
    (a schedule's firings: a firing whose key is held makes nothing)."""
    held = set(await holders_in(conn, drafts))
    kept = []
    for draft in drafts:
        taken = slot(draft)
        if taken not in held:
            kept.append(draft)
        if taken is not None:
            held.add(taken)
    return kept


async def holders_in(conn: AsyncConnection, drafts: Sequence[Draft]) -> dict[Slot, JobRow]:
    """The jobs that hold these drafts' unique keys, by (client, key), keys held no longer released, in the
    caller's transaction."""
    wanted = {taken for d in drafts if (taken := slot(d)) is not None}
    if not wanted:
        return {}
    rows = [job_row(row._mapping) for row in await conn.execute(holding(wanted))]
    live = {(job["client_id"], job["unique_live"] or ""): job for job in rows}
    now = utcnow()
    stale = {taken: job for taken, job in live.items() if taken in wanted and not holds(job, now)}
    if stale:
        await release(conn, [job["id"] for job in stale.values()])
    return {taken: job for taken, job in live.items() if taken in wanted and taken not in stale}


async def release(conn: AsyncConnection, job_ids: list[str]) -> None:
    """Clear the unique keys of these jobs, found terminal and past their windows."""
    await conn.execute(releasing(job_ids))


def holding(slots: set[Slot]) -> Select[Any]:
    """The jobs that hold any of these keys (and perhaps others of the same clients: the caller picks the pairs).
    Two INs rather than a row value's, which T-SQL lacks (DESIGN.md rule 14); the filtered unique index serves it."""
    clients, keys = sorted({c for c, _ in slots}), sorted({k for _, k in slots})
    return select(JOBS).where(JOBS.c.unique_live.in_(keys), JOBS.c.client_id.in_(clients))


def releasing(job_ids: list[str]) -> Update:
    """The release's compare-and-set: only a job still terminal lets its key go (one replayed since it was read
    keeps it); its window was checked on the row read, and never changes."""
    terminal = [str(status) for status in sorted(TERMINAL)]
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(sorted(job_ids)), JOBS.c.status.in_(terminal), JOBS.c.unique_live.is_not(None))
        .values(unique_live=None)
    )
