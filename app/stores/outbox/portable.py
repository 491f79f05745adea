"""The outbox's rows on any database SQLAlchemy speaks (SQLite, MSSQL by rendering, PostgreSQL)."""

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.broker import Outgoing
from app.models.tables import OUTBOX
from app.models.types import utcnow
from app.stores.outbox import Pending, rows_of

INSERT_MANY = insert(OUTBOX).returning(OUTBOX.c.id, sort_by_parameter_order=True)


class PortableOutbox:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def stage(
        self, conn: AsyncConnection, messages: list[Outgoing], job_ids: list[str | None] | None = None
    ) -> list[Pending]:
        """Stage messages with one statement; `job_ids` marks job messages (their publish queues the job)."""
        if not messages:
            return []
        owners: list[str | None] = list(job_ids) if job_ids is not None else [None] * len(messages)
        ids = await self._insert(conn, rows_of(messages, utcnow(), owners))
        return [Pending(int(i), m, j) for i, m, j in zip(ids, messages, owners, strict=True)]

    async def _insert(self, conn: AsyncConnection, rows: list[dict[str, Any]]) -> Iterable[int]:
        return [int(i) for i in (await conn.execute(INSERT_MANY, rows)).scalars()]

    async def drop(self, conn: AsyncConnection, ids: list[int]) -> None:
        """Delete published rows, in the caller's transaction."""
        await conn.execute(delete(OUTBOX).where(OUTBOX.c.id.in_(ids)))

    async def take_stale(self, older_than: datetime, hold_until: datetime, limit: int) -> list[Any]:
        """Rows staged before `older_than` that no relay holds, now held until `hold_until`, oldest first."""
        now = utcnow()
        token = str(uuid.uuid4())
        free = or_(OUTBOX.c.locked_until.is_(None), OUTBOX.c.locked_until < now)
        candidates = select(OUTBOX.c.id).where(OUTBOX.c.created_at < older_than, free).order_by(OUTBOX.c.id)
        async with self.engine.begin() as conn:
            ids = list((await conn.execute(candidates.limit(limit))).scalars())
            if not ids:
                return []
            hold = update(OUTBOX).where(OUTBOX.c.id.in_(ids), free).values(locked_by=token, locked_until=hold_until)
            await conn.execute(hold)
            return list(await conn.execute(select(OUTBOX).where(OUTBOX.c.locked_by == token).order_by(OUTBOX.c.id)))
