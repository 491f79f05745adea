"""Opaque keyset cursors over (created_at, id), newest first.

A cursor names its list, the time and the id of the last row served, in one canonical spelling; anything else
(forged, truncated, from another list) is a `BadCursor`, refused before any query is run."""

import base64
import binascii
import json
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, Table, and_, or_
from sqlalchemy.ext.asyncio import AsyncEngine

MAX_CURSOR_LENGTH = 256  # ours are about 120 characters


class BadCursor(ValueError):
    """A cursor this service did not hand out."""


def encode(listing: str, created_at: datetime, row_id: str) -> str:
    """The cursor to the rows after (created_at, row_id) in the list named `listing`."""
    raw = json.dumps([listing, created_at.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(listing: str, cursor: str) -> tuple[datetime, str]:
    """The position a cursor of `listing` names; BadCursor for any text `encode` would not have made."""
    try:
        if len(cursor) > MAX_CURSOR_LENGTH:
            raise ValueError("too long")
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        named, stamp, row_id = json.loads(raw)
        position = datetime.fromisoformat(stamp), str(uuid.UUID(row_id))
        if position[0].tzinfo is None or encode(named, *position) != cursor or named != listing:
            raise ValueError("not a cursor of this list")
        return position
    except (binascii.Error, ValueError, TypeError, AttributeError) as exc:
        raise BadCursor("cursor is not one this list returned; start again without it") from exc


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
    more may follow. `listing` names the list, so a cursor of one list is refused by another."""
    created, ident = table.c.created_at, table.c.id
    if cursor:
        query = query.where(older_than(created, ident, decode(listing, cursor)))
    query = query.order_by(created.desc(), ident.desc()).limit(limit + 1)
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    last = rows[limit - 1] if len(rows) > limit else None
    return rows[:limit], encode(listing, last["created_at"], last["id"]) if last else None
