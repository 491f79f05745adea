"""Opaque keyset cursors over (created_at, id), newest first."""

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, Table, and_, or_
from sqlalchemy.ext.asyncio import AsyncEngine


class BadCursor(ValueError):
    """A cursor this service did not hand out."""


def encode(created_at: datetime, row_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, row_id = json.loads(raw)
        return datetime.fromisoformat(stamp), str(row_id)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise BadCursor("cursor is not one this service returned; start again without it") from exc


def older_than(created: ColumnElement[Any], ident: ColumnElement[Any], cursor: str) -> ColumnElement[bool]:
    """Rows after the cursor in newest-first order, spelled out (row values are not T-SQL)."""
    stamp, row_id = decode(cursor)
    return or_(created < stamp, and_(created == stamp, ident < row_id))


async def newest_first(
    engine: AsyncEngine, table: Table, query: Select[Any], limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """One page of `query` over `table`, newest first by (created_at, id); the last row when more may follow."""
    created, ident = table.c.created_at, table.c.id
    if cursor:
        query = query.where(older_than(created, ident, cursor))
    query = query.order_by(created.desc(), ident.desc()).limit(limit + 1)
    async with engine.connect() as conn:
        rows = [dict(r._mapping) for r in await conn.execute(query)]
    return rows[:limit], rows[limit - 1] if len(rows) > limit else None
