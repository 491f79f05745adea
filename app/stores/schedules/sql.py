"""The schedules' statements in portable SQL, PostgreSQL included (SQLite, and MSSQL by rendering: the claim's
row lock is `models/claims.skip_locked`, the per-row move `models/setwise.per_row`). No array twin because none
of them is hot: the API's are one row each, and the scheduler's are a few a cycle whatever the batch (the jobs a
firing makes are saved by the jobs store, in one statement on PostgreSQL)."""

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, Select, Update, and_, delete, func, insert, select, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.models.claims import skip_locked
from app.models.rows import ScheduleRow
from app.models.setwise import per_row
from app.models.tables import JOBS, SCHEDULES
from app.stores.owned import owned_by
from app.stores.pagination import newest_first
from app.stores.schedules import Firing

LISTING = "schedules"  # the list a cursor of `page` names


class SqlSchedules:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def insert(self, schedule: ScheduleRow) -> None:
        """A new schedule, every column given."""
        async with self.engine.begin() as conn:
            await conn.execute(insert(SCHEDULES), dict(schedule))

    async def get(self, schedule_id: str, client_id: str | None) -> ScheduleRow | None:
        """The schedule, unless `client_id` may not see it (None sees every client's)."""
        async with self.engine.connect() as conn:
            found = (await conn.execute(_visible(schedule_id, client_id))).first()
        return _row(found) if found else None

    async def page(self, client_id: str | None, limit: int, cursor: str | None) -> tuple[list[ScheduleRow], str | None]:
        """The schedules `client_id` may see, newest first, and the cursor to the next page when more may follow."""
        query = select(SCHEDULES).where(owned_by(SCHEDULES, client_id))
        rows, after = await newest_first(self.engine, SCHEDULES, query, limit, cursor, LISTING)
        return [cast(ScheduleRow, row) for row in rows], after

    async def update(
        self, schedule_id: str, client_id: str | None, values: Callable[[ScheduleRow], dict[str, Any]]
    ) -> ScheduleRow | None:
        """Set the columns `values` computes from the schedule `get` finds, read under a row lock, and bump its
        version; the schedule as it then stands, or None when there is none to change."""
        async with self.engine.begin() as conn:
            found = (await conn.execute(_visible(schedule_id, client_id).with_for_update())).first()
            if found is None:
                return None
            row = _row(found)
            changed = {**values(row), "version": row["version"] + 1}
            await conn.execute(update(SCHEDULES).where(SCHEDULES.c.id == schedule_id).values(**changed))
        return cast(ScheduleRow, {**row, **changed})

    async def delete(self, schedule_id: str, client_id: str | None) -> bool:
        """Remove the schedule `get` would find; False if none."""
        query = delete(SCHEDULES).where(SCHEDULES.c.id == schedule_id, owned_by(SCHEDULES, client_id))
        async with self.engine.begin() as conn:
            return bool((await conn.execute(query)).rowcount)

    async def earliest_firing(self) -> datetime | None:
        """The earliest firing an active schedule owes (due or not), for the overdue gauge; None if none is active."""
        async with self.engine.connect() as conn:
            earliest: datetime | None = (
                await conn.execute(select(func.min(SCHEDULES.c.next_run_at)).where(SCHEDULES.c.active))
            ).scalar()
        return earliest

    async def any_due(self, now: datetime, held: frozenset[str]) -> bool:
        """Whether an active schedule of a client not `held` is due at `now`: a read, no lock."""
        async with self.engine.connect() as conn:
            return (await conn.execute(select(SCHEDULES.c.id).where(_due(now, held)).limit(1))).first() is not None

    async def claim_due(
        self, conn: AsyncConnection, now: datetime, limit: int, held: frozenset[str]
    ) -> list[ScheduleRow]:
        """Up to `limit` due schedules of clients not `held`, oldest firing first, locked for the caller's
        transaction; another scheduler passes over them (`skip_locked`), as this one passes over its."""
        return [_row(row) for row in await conn.execute(due_claim(now, limit, held))]

    async def fired(self, conn: AsyncConnection, keys: Sequence[str]) -> set[tuple[str, str]]:
        """The (client_id, idempotency key) of the jobs saved already under these firings' keys."""
        if not keys:
            return set()
        made = select(JOBS.c.client_id, JOBS.c.idempotency_key).where(JOBS.c.idempotency_key.in_(list(keys)))
        return {(client, key) for client, key in await conn.execute(made)}

    async def advance(self, conn: AsyncConnection, firings: Sequence[Firing], now: datetime) -> set[str]:
        """Each schedule to its next firing, if its version is still the one it was claimed at; the ids moved."""
        if not firings:
            return set()
        return set((await conn.execute(_advance(firings, now))).scalars())


def due_claim(now: datetime, limit: int, held: frozenset[str] = frozenset()) -> Select[Any]:
    """The due schedules, but those of `held` clients, locked for this transaction; another scheduler passes over
    them (`skip_locked`)."""
    query = select(SCHEDULES).where(_due(now, held)).order_by(SCHEDULES.c.next_run_at).limit(limit)
    return skip_locked(query, SCHEDULES)


def _due(now: datetime, held: frozenset[str]) -> ColumnElement[bool]:
    due = and_(SCHEDULES.c.active, SCHEDULES.c.next_run_at <= now)
    return and_(due, SCHEDULES.c.client_id.not_in(sorted(held))) if held else due


def _advance(firings: Sequence[Firing], now: datetime) -> Update:
    """Every due schedule to its next firing in one UPDATE, each guarded by the version it was read at."""
    by_id = {f.schedule["id"]: f for f in firings}
    nexts = {i: f.next_run_at for i, f in by_id.items()}
    fired = {i: f.fire_at for i, f in by_id.items()}
    versions = {i: f.schedule["version"] for i, f in by_id.items()}
    col = SCHEDULES.c
    return (
        update(SCHEDULES)
        .where(col.id.in_(list(by_id)), col.version == per_row(col.id, col.version, versions))
        .values(
            next_run_at=per_row(col.id, col.next_run_at, nexts),
            last_run_at=per_row(col.id, col.last_run_at, fired),
            version=col.version + 1,
            updated_at=now,
        )
        .returning(col.id)
    )


def _visible(schedule_id: str, client_id: str | None) -> Select[Any]:
    return select(SCHEDULES).where(SCHEDULES.c.id == schedule_id, owned_by(SCHEDULES, client_id))


def _row(found: Row[Any]) -> ScheduleRow:
    return cast(ScheduleRow, dict(found._mapping))
