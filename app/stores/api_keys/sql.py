"""The API keys' rows on every database SQLAlchemy speaks (PostgreSQL, SQLite, MSSQL by rendering). The one
implementation: none of these statements is hot, so none has a PostgreSQL twin."""

from typing import Any, cast

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.rows import ApiKeyRow
from app.models.tables import API_KEYS
from app.models.types import utcnow

KEYS = API_KEYS


class SqlApiKeys:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def add(self, key: ApiKeyRow) -> None:
        """A new key, every column given."""
        async with self.engine.begin() as conn:
            await conn.execute(insert(KEYS).values(**key))

    async def live(self, key_hash: str) -> ApiKeyRow | None:
        """The key with this hash, unless it is revoked."""
        query = select(KEYS).where(KEYS.c.key_hash == key_hash, KEYS.c.revoked_at.is_(None))
        async with self.engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return _key(row) if row else None

    async def live_among(self, key_ids: set[str]) -> set[str]:
        """Those of `key_ids` that are neither revoked nor gone."""
        query = select(KEYS.c.id).where(KEYS.c.id.in_(list(key_ids)), KEYS.c.revoked_at.is_(None))
        async with self.engine.connect() as conn:
            return set((await conn.execute(query)).scalars())

    async def newest_first(self) -> list[ApiKeyRow]:
        """Every key, revoked ones too, newest first."""
        query = select(KEYS).order_by(KEYS.c.created_at.desc(), KEYS.c.id)
        async with self.engine.connect() as conn:
            return [_key(row) for row in await conn.execute(query)]

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key now; False when there is no such live key."""
        revoked = update(KEYS).where(KEYS.c.id == key_id, KEYS.c.revoked_at.is_(None)).values(revoked_at=utcnow())
        async with self.engine.begin() as conn:
            result = await conn.execute(revoked)
        return result.rowcount == 1


def _key(row: Any) -> ApiKeyRow:
    return cast(ApiKeyRow, dict(row._mapping))
