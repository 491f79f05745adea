"""Deliveries as the API offers them: listed with their attempts, sent again."""

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.cursors import decode, encode
from app.core.statuses import DeliveryStatus
from app.models.rows import DeliveryLog, delivery_row
from app.models.tables import ATTEMPTS, DELIVERIES, JOBS
from app.services.outbox import Outbox
from app.services.tenancy import Principal, visible_to
from app.stores.deliveries import DeliveryStore
from app.stores.pagination import older_than

LISTING = "deliveries"  # the name an endpoint's deliveries' cursors carry
DELIVERY_ID = re.compile(r"msg_[0-9a-f]{32}")


def delivery_id_text(row_id: str) -> str:
    """A delivery id as the cursors hold it; ValueError for anything else."""
    if not DELIVERY_ID.fullmatch(row_id):
        raise ValueError("not a delivery id")
    return row_id


@dataclass(frozen=True)
class DeliveryFilters:
    """What an endpoint's delivery list is narrowed to, and its page (`limit` None: every delivery, oldest first)."""

    status: str | None = None
    event_type: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int | None = None
    cursor: str | None = None

    def where(self) -> list[ColumnElement[bool]]:
        """The filters as WHERE clauses; a time bound applies to when a delivery was made."""
        clauses: list[ColumnElement[bool]] = []
        if self.status:
            clauses.append(DELIVERIES.c.status == self.status)
        if self.event_type:
            clauses.append(DELIVERIES.c.event_type == self.event_type)
        if self.since:
            clauses.append(DELIVERIES.c.created_at >= self.since)
        if self.until:
            clauses.append(DELIVERIES.c.created_at < self.until)
        return clauses


@dataclass(frozen=True)
class DeliveryService:
    """What the API offers about deliveries: list them with their attempts, send them again."""

    engine: AsyncEngine
    store: DeliveryStore
    outbox: Outbox

    async def for_job(self, principal: Principal, job_id: str) -> list[DeliveryLog] | None:
        async with self.engine.connect() as conn:
            visible = select(JOBS.c.id).where(JOBS.c.id == job_id, visible_to(JOBS, principal))
            if (await conn.execute(visible)).first() is None:
                return None
            of_job = select(DELIVERIES).where(DELIVERIES.c.job_id == job_id)
            return await self._with_attempts(conn, of_job.order_by(DELIVERIES.c.created_at))

    async def for_endpoint(
        self, principal: Principal, endpoint_id: str, filters: DeliveryFilters
    ) -> tuple[list[DeliveryLog], str | None]:
        """The endpoint's deliveries that pass the filters, each with its attempts: every one oldest first, or
        with a `limit`, a page newest first and the cursor to the next page when more may follow."""
        query = select(DELIVERIES).where(
            DELIVERIES.c.endpoint_id == endpoint_id, visible_to(DELIVERIES, principal), *filters.where()
        )
        async with self.engine.connect() as conn:
            if filters.limit is None:
                return await self._with_attempts(conn, query.order_by(DELIVERIES.c.created_at)), None
            if filters.cursor:
                position = decode(LISTING, filters.cursor, delivery_id_text)
                query = query.where(older_than(DELIVERIES.c.created_at, DELIVERIES.c.id, position))
            newest = query.order_by(DELIVERIES.c.created_at.desc(), DELIVERIES.c.id.desc())
            page = await self._with_attempts(conn, newest.limit(filters.limit + 1))
        more = len(page) > filters.limit
        last = page[filters.limit - 1] if more else None
        return page[: filters.limit], encode(LISTING, last["created_at"], last["id"]) if last else None

    async def _with_attempts(self, conn: AsyncConnection, query: Any) -> list[DeliveryLog]:
        deliveries = [delivery_row(r._mapping) for r in await conn.execute(query)]
        ids = [d["id"] for d in deliveries]
        attempts: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
        if ids:
            rows = await conn.execute(
                select(ATTEMPTS).where(ATTEMPTS.c.delivery_id.in_(ids)).order_by(ATTEMPTS.c.attempt)
            )
            for row in rows:
                attempts[row.delivery_id].append(dict(row._mapping))
        return [{**d, "webhook_id": d["endpoint_id"], "attempts": attempts[d["id"]]} for d in deliveries]

    async def redeliver(self, principal: Principal, ids: list[str] | None = None, **where: Any) -> list[str]:
        """Send deliveries again, at once (an operator's action goes through an open circuit, as its probe), with a
        fresh retry budget and the same webhook-id; return their ids."""
        chosen = [visible_to(DELIVERIES, principal)]
        if ids is not None:
            chosen.append(DELIVERIES.c.id.in_(ids))
        if "endpoint_id" in where:
            chosen.append(DELIVERIES.c.endpoint_id == where["endpoint_id"])
        if "failed_since" in where:
            since: datetime = where["failed_since"]
            chosen += [DELIVERIES.c.status == DeliveryStatus.FAILED, DELIVERIES.c.created_at >= since]
        if where.get("pending"):
            chosen.append(DELIVERIES.c.status == DeliveryStatus.PENDING)
        redelivered, staged = await self.store.redeliver(tuple(chosen))
        await self.outbox.publish(staged)
        return redelivered
