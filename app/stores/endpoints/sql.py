"""The webhook endpoints' rows on every database SQLAlchemy speaks (PostgreSQL, SQLite, MSSQL by rendering). The
one implementation: none of these statements is hot, so none has a PostgreSQL twin."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.models.rows import EndpointRow
from app.models.tables import ENDPOINTS
from app.models.types import utcnow
from app.stores.endpoints import health
from app.stores.owned import owned_by


class SqlEndpoints:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def add(self, endpoint: EndpointRow) -> None:
        """A new endpoint, every column given."""
        async with self.engine.begin() as conn:
            await conn.execute(insert(ENDPOINTS).values(**endpoint))

    async def live(self, client_id: str | None) -> list[EndpointRow]:
        """The endpoints not deleted of `client_id` (every client's when None), oldest first."""
        query = select(ENDPOINTS).where(*_visible(client_id)).order_by(ENDPOINTS.c.created_at)
        async with self.engine.connect() as conn:
            return [_endpoint(row) for row in await conn.execute(query)]

    async def get(self, endpoint_id: str, client_id: str | None) -> EndpointRow | None:
        """The endpoint, unless it is deleted or `client_id` may not see it (None sees every client's)."""
        async with self.engine.connect() as conn:
            return await self.read(conn, endpoint_id, client_id)

    async def read(self, conn: AsyncConnection, endpoint_id: str, client_id: str | None) -> EndpointRow | None:
        """`get`, in the caller's transaction."""
        row = (await conn.execute(select(ENDPOINTS).where(ENDPOINTS.c.id == endpoint_id, *_visible(client_id)))).first()
        return _endpoint(row) if row else None

    async def change(self, endpoint_id: str, client_id: str | None, values: dict[str, Any]) -> EndpointRow | None:
        """Set these columns (and `updated_at`) of an endpoint `get` finds, in one transaction; the endpoint as it
        then stands, or None when there is none to change."""
        async with self.engine.begin() as conn:
            if await self.read(conn, endpoint_id, client_id) is None:
                return None
            changed = update(ENDPOINTS).where(ENDPOINTS.c.id == endpoint_id).values(**values, updated_at=utcnow())
            await conn.execute(changed)
            return await self.read(conn, endpoint_id, client_id)

    async def update_live(self, endpoint_id: str, client_id: str | None, values: dict[str, Any]) -> bool:
        """Set these columns (and `updated_at`) of an endpoint `get` would find, one statement; False if none."""
        changed = (
            update(ENDPOINTS)
            .where(ENDPOINTS.c.id == endpoint_id, *_visible(client_id))
            .values(**values, updated_at=utcnow())
        )
        async with self.engine.begin() as conn:
            result = await conn.execute(changed)
        return result.rowcount == 1

    async def clear_failing(self, conn: AsyncConnection, endpoint_ids: Sequence[str]) -> None:
        """A success ends these endpoints' failing periods."""
        await conn.execute(health.clear_failing(endpoint_ids))

    async def mark_failing(self, conn: AsyncConnection, endpoint_ids: Sequence[str], now: datetime) -> None:
        """A failure starts these endpoints' failing periods at `now`, where none is running."""
        await conn.execute(health.mark_failing(endpoint_ids, now))

    async def failing_since(
        self, conn: AsyncConnection, endpoint_ids: Sequence[str], cutoff: datetime
    ) -> list[tuple[str, datetime]]:
        """The active endpoints among these that have failed everything since `cutoff` or before, with when
        they began to."""
        rows = await conn.execute(health.failing_too_long(endpoint_ids, cutoff))
        return [(row.id, row.failing_since) for row in rows]

    async def disable(
        self, conn: AsyncConnection, reasons: Mapping[str, str], gone: Sequence[str], cutoff: datetime, now: datetime
    ) -> set[str]:
        """Disable each active endpoint of `reasons` with its reason, those not `gone` only if still failing since
        `cutoff`; the ids disabled."""
        return set((await conn.execute(health.disable(reasons, gone, cutoff, now))).scalars())


def _visible(client_id: str | None) -> tuple[ColumnElement[bool], ...]:
    """An endpoint not deleted, that `client_id` may see."""
    return ENDPOINTS.c.deleted_at.is_(None), owned_by(ENDPOINTS, client_id)


def _endpoint(row: Any) -> EndpointRow:
    return cast(EndpointRow, dict(row._mapping))
