"""Redrives in the database: created with the items they take, read, paged, moved between statuses with a row of
history each time, and leased to the one process that drives each (`advance.py` sends their items)."""

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, delete, func, insert, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.statuses import DeliveryStatus, JobStatus, RedriveKind, RedriveStatus
from app.models.tables import DELIVERIES, JOBS, REDRIVE_EVENTS, REDRIVE_ITEMS, REDRIVES
from app.models.types import utcnow
from app.stores.owned import owned_by
from app.stores.pagination import newest_first

R = RedriveStatus
Row = dict[str, Any]


@dataclass(frozen=True)
class NewRedrive:
    """What a redrive is asked to send: whose (`client_id`; None: every client's), which, how many, how fast."""

    client_id: str | None
    created_by: str
    kind: RedriveKind
    selection: dict[str, Any]
    max_items: int
    per_second: float


class Moved(Exception):
    """The redrive is not in a status that allows the change (it holds the status it is in)."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class RedriveStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(self, new: NewRedrive) -> Row:
        """The redrive and the items it takes (the first `max_items` matching, oldest failure first), in one
        transaction; one that took nothing is finished at once."""
        redrive_id, now = str(uuid.uuid4()), utcnow()
        async with self.engine.begin() as conn:
            await conn.execute(insert(REDRIVES).values(_new_row(redrive_id, new, now)))
            await conn.execute(
                insert(REDRIVE_ITEMS).from_select(["redrive_id", "seq", "item_id"], _items(redrive_id, new))
            )
            total = (await conn.execute(select(func.count()).where(REDRIVE_ITEMS.c.redrive_id == redrive_id))).scalar()
            status = R.RUNNING if total else R.FINISHED
            done = {"finished_at": now} if status is R.FINISHED else {}
            await conn.execute(
                update(REDRIVES).where(REDRIVES.c.id == redrive_id).values(total=total, status=status, **done)
            )
            await event(conn, redrive_id, "created", new.created_by, now)
            if status is R.FINISHED:
                await event(conn, redrive_id, "finished", None, now)
        return await self.one(redrive_id, None)  # type: ignore[return-value]

    async def one(self, redrive_id: str, scope: str | None) -> Row | None:
        """The redrive with its history, if `scope` (a client id; None, an admin: every redrive) may see it."""
        async with self.engine.connect() as conn:
            query = select(REDRIVES).where(REDRIVES.c.id == redrive_id, owned_by(REDRIVES, scope))
            row = (await conn.execute(query)).first()
            if row is None:
                return None
            return (await with_history(conn, [dict(row._mapping)]))[0]

    async def page(
        self, scope: str | None, status: str | None, limit: int, cursor: str | None
    ) -> tuple[list[Row], str | None]:
        """The redrives `scope` may see, newest first, each with its history."""
        query: Select[Any] = select(REDRIVES).where(owned_by(REDRIVES, scope))
        if status:
            query = query.where(REDRIVES.c.status == status)
        rows, after = await newest_first(self.engine, REDRIVES, query, limit, cursor, "redrives")
        async with self.engine.connect() as conn:
            return await with_history(conn, rows), after

    async def move(self, redrive_id: str, target: RedriveStatus, sources: frozenset[RedriveStatus], actor: str) -> None:
        """One operator's change by compare-and-set on the status, with its history row; Moved when the redrive's
        status does not allow it."""
        now = utcnow()
        values: dict[str, Any] = {"status": target, "updated_at": now}
        if target is not R.RUNNING:  # a resumed redrive is then taken by whichever process looks first
            values.update(lease_owner=None, lease_until=None)
        if target is R.CANCELLED:
            values["finished_at"] = now
        async with self.engine.begin() as conn:
            await _change(conn, redrive_id, sources, values)
            await event(conn, redrive_id, _EVENTS[target], actor, now)
            if target is R.CANCELLED:
                await forget_items(conn, redrive_id)

    async def retime(self, redrive_id: str, per_second: float, actor: str) -> None:
        """A new pace for a running or paused redrive, with its row of history; Moved when it has ended. The
        process driving it takes the pace at its next lease renewal (within a second)."""
        now = utcnow()
        async with self.engine.begin() as conn:
            await _change(conn, redrive_id, {R.RUNNING, R.PAUSED}, {"per_second": per_second, "updated_at": now})
            await event(conn, redrive_id, "rate_changed", actor, now)

    async def lease(self, owner: str, seconds: float) -> list[Row]:
        """The running redrives `owner` drives for the next `seconds`: those it held, and those no live lease
        holds. One indexed read when there is nothing to drive."""
        now = utcnow()
        free = and_(
            REDRIVES.c.status == R.RUNNING,
            or_(REDRIVES.c.lease_owner.is_(None), REDRIVES.c.lease_owner == owner, REDRIVES.c.lease_until < now),
        )
        async with self.engine.begin() as conn:
            ids = list((await conn.execute(select(REDRIVES.c.id).where(free))).scalars())
            if not ids:
                return []
            until = now + timedelta(seconds=seconds)
            taken = update(REDRIVES).where(free, REDRIVES.c.id.in_(ids)).values(lease_owner=owner, lease_until=until)
            await conn.execute(taken)
            rows = await conn.execute(select(REDRIVES).where(REDRIVES.c.id.in_(ids), REDRIVES.c.lease_owner == owner))
            return [dict(row._mapping) for row in rows]

    async def release(self, owner: str) -> None:
        """Give up `owner`'s leases (a stopping process), so another process takes its redrives at once."""
        async with self.engine.begin() as conn:
            mine = REDRIVES.c.lease_owner == owner
            await conn.execute(update(REDRIVES).where(mine).values(lease_owner=None, lease_until=None))


_EVENTS = {R.PAUSED: "paused", R.RUNNING: "resumed", R.CANCELLED: "cancelled", R.FINISHED: "finished"}


def _new_row(redrive_id: str, new: NewRedrive, now: datetime) -> Row:
    return {
        "id": redrive_id,
        "client_id": new.client_id,
        "created_by": new.created_by,
        "kind": new.kind,
        "selection": new.selection,
        "max_items": new.max_items,
        "per_second": new.per_second,
        "status": R.RUNNING,
        "total": 0,
        "replayed": 0,
        "skipped": 0,
        "reached": 0,
        "created_at": now,
        "updated_at": now,
    }


def _items(redrive_id: str, new: NewRedrive) -> Select[Any]:
    """The items a new redrive takes, numbered 1.. in the order it sends them: oldest failure first."""
    table, when, where = _matching(new)
    order = (when, table.c.id)
    seq = func.row_number().over(order_by=order)
    return select(literal(redrive_id), seq, table.c.id).where(*where).order_by(*order).limit(new.max_items)


def _matching(new: NewRedrive) -> tuple[Any, Any, list[ColumnElement[bool]]]:
    """The table, the time its items are ordered by, and the WHERE clauses of a redrive's selection."""
    chosen = new.selection
    if new.kind is RedriveKind.JOBS:
        where = [owned_by(JOBS, new.client_id), JOBS.c.status == JobStatus.DEAD_LETTERED]
        if chosen.get("group"):
            where.append(JOBS.c.failure_group == chosen["group"])
        if chosen.get("job_type"):
            where.append(JOBS.c.job_type == chosen["job_type"])
        if chosen.get("job_ids") is not None:
            where.append(JOBS.c.id.in_(chosen["job_ids"]))
        return JOBS, JOBS.c.finished_at, where
    where = [owned_by(DELIVERIES, new.client_id), DELIVERIES.c.status == DeliveryStatus.FAILED]
    if chosen.get("webhook_id"):
        where.append(DELIVERIES.c.endpoint_id == chosen["webhook_id"])
    if chosen.get("event_type"):
        where.append(DELIVERIES.c.event_type == chosen["event_type"])
    return DELIVERIES, DELIVERIES.c.created_at, where


async def _change(
    conn: AsyncConnection, redrive_id: str, sources: Collection[RedriveStatus], values: dict[str, Any]
) -> None:
    """Set `values` on the redrive by compare-and-set on its status being one of `sources`; Moved, holding the
    status it is in, when it is not."""
    guard = and_(REDRIVES.c.id == redrive_id, REDRIVES.c.status.in_(sources))
    moved = await conn.execute(update(REDRIVES).where(guard).values(**values))
    if moved.rowcount != 1:
        status = (await conn.execute(select(REDRIVES.c.status).where(REDRIVES.c.id == redrive_id))).scalar()
        raise Moved(str(status))


async def event(conn: AsyncConnection, redrive_id: str, what: str, actor: str | None, now: datetime) -> None:
    """A row of the redrive's history, in the caller's transaction."""
    values = {"redrive_id": redrive_id, "event": what, "actor": actor, "created_at": now}
    await conn.execute(insert(REDRIVE_EVENTS).values(values))


async def forget_items(conn: AsyncConnection, redrive_id: str) -> None:
    """An ended redrive's items, no longer needed (its counts hold its progress): nothing grows forever."""
    await conn.execute(delete(REDRIVE_ITEMS).where(REDRIVE_ITEMS.c.redrive_id == redrive_id))


async def with_history(conn: AsyncConnection, rows: list[Row]) -> list[Row]:
    """Each redrive with its `history`, oldest first, read in one statement."""
    ids = [row["id"] for row in rows]
    history: dict[str, list[Row]] = {i: [] for i in ids}
    if ids:
        query = select(REDRIVE_EVENTS).where(REDRIVE_EVENTS.c.redrive_id.in_(ids)).order_by(REDRIVE_EVENTS.c.id)
        for row in await conn.execute(query):
            history[row.redrive_id].append({"event": row.event, "by": row.actor, "at": row.created_at})
    return [{**row, "history": history[row["id"]]} for row in rows]
