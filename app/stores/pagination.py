"""Pages newest first by (created_at, id), behind the opaque cursors of `app/core/cursors.py`: the one keyset
pager, for the stores' lists and the services' own."""

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, Table, and_, or_
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.cursors import decode, encode


def older_than(
    created: ColumnElement[Any], ident: ColumnElement[Any], position: tuple[datetime, str]
) -> ColumnElement[bool]:
    """Rows after the position in newest-first order, spelled out (row values are not T-SQL)."""
    stamp, row_id = position
    return or_(created < stamp, and_(created == stamp, ident < row_id))


async def newest_first(
    engine: AsyncEngine, table: Table, query: Select[Any], limit: int, cursor: str | None, listing: str
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of `query` over `table`, newest first by (created_at, id), and the cursor to the next page when
    more may follow. `listing` names the list, so a cursor of one list is refused by another (`BadCursor`)."""
    created, ident = table.c.created_at, table.c.id
    if cursor:
        query = query.where(older_than(created, ident, decode(listing, cursor)))
    query = query.order_by(created.desc(), ident.desc()).limit(limit + 1)
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    last = rows[limit - 1] if len(rows) > limit else None
    return rows[:limit], encode(listing, last["created_at"], last["id"]) if last else None
