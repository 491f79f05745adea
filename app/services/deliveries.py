"""Deliveries as the API offers them: listed with their attempts, sent again."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.statuses import DeliveryStatus
from app.models.rows import DeliveryLog, delivery_row
from app.models.tables import ATTEMPTS, DELIVERIES, JOBS
from app.services.outbox import Outbox
from app.services.tenancy import Principal, visible_to
from app.stores.deliveries import DeliveryStore


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
            return await self._with_attempts(conn, select(DELIVERIES).where(DELIVERIES.c.job_id == job_id))

    async def for_endpoint(self, principal: Principal, endpoint_id: str, status: str | None) -> list[DeliveryLog]:
        query = select(DELIVERIES).where(DELIVERIES.c.endpoint_id == endpoint_id, visible_to(DELIVERIES, principal))
        if status:
            query = query.where(DELIVERIES.c.status == status)
        async with self.engine.connect() as conn:
            return await self._with_attempts(conn, query)

    async def _with_attempts(self, conn: AsyncConnection, query: Any) -> list[DeliveryLog]:
        deliveries = [delivery_row(r._mapping) for r in await conn.execute(query.order_by(DELIVERIES.c.created_at))]
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
