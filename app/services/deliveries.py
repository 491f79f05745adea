"""Deliveries: one per (event, endpoint) (rule 10), staged with their message; listing and sending again."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Update, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.messages import delivery_id, delivery_outgoing, endpoint_key
from app.core.names import SUBSCRIBABLE_EVENTS, Names
from app.core.statuses import DeliveryStatus
from app.models import pg_batch
from app.models.rows import DeliveryRow
from app.models.tables import ATTEMPTS, DELIVERIES, ENDPOINTS, JOBS
from app.models.types import utcnow
from app.services.outbox import Outbox
from app.services.tenancy import Principal, visible_to
from app.stores.jobs.moves import Row
from app.stores.outbox import Pending, rows_of
from app.stores.outbox.portable import PortableOutbox

CALLBACK = "callback"


@dataclass(frozen=True)
class Target:
    """Where an event goes: an endpoint (by id), or the job's own callback URL."""

    key: str
    url: str
    endpoint_id: str | None


@dataclass(frozen=True)
class Fanned:
    """One event with the targets it goes to."""

    event: Row
    body: bytes
    targets: list[Target]
    request_id: str | None


ROWS_PER_INSERT = 100  # 17 columns a row: within MSSQL's 2,100 parameters per statement


async def stage(conn: AsyncConnection, names: Names, fanned: list[Fanned]) -> list[list[Pending]]:
    """Insert the deliveries these events do not have yet, each with its message in the outbox, in a few
    statements for the whole batch (one on PostgreSQL); one list of staged messages per event (empty when it
    had them all)."""
    wanted = [[delivery_id(f.event["id"], t.key) for t in f.targets] for f in fanned]
    every = {i for ids in wanted for i in ids}
    if not every:
        return [[] for _ in fanned]
    on_postgres = pg_batch.applies(conn)
    # PostgreSQL skips the deliveries already there as it inserts (rule 10's unique index); elsewhere, look first.
    existing: set[str] = set()
    if not on_postgres:
        existing = set((await conn.execute(select(DELIVERIES.c.id).where(DELIVERIES.c.id.in_(every)))).scalars())
    now = utcnow()
    rows, owners = _new_rows(fanned, wanted, existing, now)
    messages = [
        delivery_outgoing(names, row["id"], row["request_id"], endpoint_key(row["endpoint_id"], row["url"]))
        for row in rows
    ]
    staged: list[list[Pending]] = [[] for _ in fanned]
    if on_postgres:
        ids = await pg_batch.stage_deliveries(conn, rows, rows_of(messages, now))
        for owner, message in zip(owners, messages, strict=True):
            if message.message_id in ids:  # not fanned out before
                staged[owner].append(Pending(ids[message.message_id], message))
        return staged
    for start in range(0, len(rows), ROWS_PER_INSERT):
        await conn.execute(insert(DELIVERIES).values(rows[start : start + ROWS_PER_INSERT]))
    for owner, pending in zip(owners, await PortableOutbox(conn.engine).stage(conn, messages), strict=True):
        staged[owner].append(pending)
    return staged


def _new_rows(
    fanned: list[Fanned], wanted: list[list[str]], existing: set[str], now: datetime
) -> tuple[list[DeliveryRow], list[int]]:
    """The delivery rows to insert, and the index of the event each is for."""
    rows: list[DeliveryRow] = []
    owners: list[int] = []
    for index, (item, ids) in enumerate(zip(fanned, wanted, strict=True)):
        job = item.event.get("data", {}).get("job") or {}
        for target, row_id in zip(item.targets, ids, strict=True):
            if row_id in existing:
                continue
            existing.add(row_id)  # an event twice in one batch still makes one delivery (rule 10)
            rows.append(_delivery_row(row_id, item, target, job, now))
            owners.append(index)
    return rows, owners


def _delivery_row(row_id: str, item: Fanned, target: Target, job: Row, now: datetime) -> DeliveryRow:
    return {
        "id": row_id,
        "event_id": item.event["id"],
        "target": target.key,
        "endpoint_id": target.endpoint_id,
        "client_id": job.get("client_id") or item.event["client_id"],
        "job_id": job.get("id"),
        "event_type": item.event["type"],
        "url": target.url,
        "body": item.body,
        "request_id": item.request_id,
        "status": DeliveryStatus.PENDING,
        "attempt_count": 0,
        "budget_used": 0,
        "next_attempt_at": None,
        "lease_until": None,
        "created_at": now,
        "updated_at": now,
    }


async def targets_for(conn: AsyncConnection, events: list[Row]) -> list[list[Target]]:
    """For each job event, the endpoints subscribed to it and the job's callback URL: one query for all."""
    jobs = [event["data"]["job"] if event.get("type") in SUBSCRIBABLE_EVENTS else None for event in events]
    clients = {job["client_id"] for job in jobs if job is not None}
    rows: Sequence[Any] = []
    if clients and pg_batch.applies(conn):
        rows = await pg_batch.subscribed_endpoints(conn, sorted(clients))
    elif clients:
        query = select(
            ENDPOINTS.c.id,
            ENDPOINTS.c.client_id,
            ENDPOINTS.c.url,
            ENDPOINTS.c.events,
            ENDPOINTS.c.job_type,
            ENDPOINTS.c.job_id,
        ).where(ENDPOINTS.c.client_id.in_(clients), ENDPOINTS.c.active.is_(True), ENDPOINTS.c.deleted_at.is_(None))
        rows = (await conn.execute(query.order_by(ENDPOINTS.c.created_at, ENDPOINTS.c.id))).mappings().all()
    found: list[list[Target]] = []
    for event, job in zip(events, jobs, strict=True):
        if job is None:
            found.append([])
            continue
        targets = [
            Target(row["id"], row["url"], row["id"])
            for row in rows
            if row["client_id"] == job["client_id"]
            and row["job_type"] in (None, job["job_type"])
            and row["job_id"] in (None, job["id"])
            and event["type"] in row["events"]
        ]
        if job.get("callback_url"):
            targets.append(Target(CALLBACK, job["callback_url"], None))
        found.append(targets)
    return found


def parse_event(body: bytes) -> Row:
    """A job event as published on the events exchange."""
    event: Row = json.loads(body)
    if not isinstance(event, dict) or "id" not in event or "type" not in event:
        raise ValueError("not a job event")
    return event


@dataclass(frozen=True)
class DeliveryService:
    """What the API offers about deliveries: list them with their attempts, send them again."""

    engine: AsyncEngine
    outbox: Outbox
    names: Names

    async def for_job(self, principal: Principal, job_id: str) -> list[Row] | None:
        async with self.engine.connect() as conn:
            visible = select(JOBS.c.id).where(JOBS.c.id == job_id, visible_to(JOBS, principal))
            if (await conn.execute(visible)).first() is None:
                return None
            return await self._with_attempts(conn, select(DELIVERIES).where(DELIVERIES.c.job_id == job_id))

    async def for_endpoint(self, principal: Principal, endpoint_id: str, status: str | None) -> list[Row]:
        query = select(DELIVERIES).where(DELIVERIES.c.endpoint_id == endpoint_id, visible_to(DELIVERIES, principal))
        if status:
            query = query.where(DELIVERIES.c.status == status)
        async with self.engine.connect() as conn:
            return await self._with_attempts(conn, query)

    async def _with_attempts(self, conn: AsyncConnection, query: Any) -> list[Row]:
        deliveries = [dict(r._mapping) for r in await conn.execute(query.order_by(DELIVERIES.c.created_at))]
        ids = [d["id"] for d in deliveries]
        attempts: dict[str, list[Row]] = {i: [] for i in ids}
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
        columns = (DELIVERIES.c.id, DELIVERIES.c.request_id, DELIVERIES.c.endpoint_id, DELIVERIES.c.url)
        query = select(*columns).where(visible_to(DELIVERIES, principal))
        if ids is not None:
            query = query.where(DELIVERIES.c.id.in_(ids))
        if "endpoint_id" in where:
            query = query.where(DELIVERIES.c.endpoint_id == where["endpoint_id"])
        if "failed_since" in where:
            since: datetime = where["failed_since"]
            query = query.where(DELIVERIES.c.status == DeliveryStatus.FAILED, DELIVERIES.c.created_at >= since)
        if where.get("pending"):
            query = query.where(DELIVERIES.c.status == DeliveryStatus.PENDING)
        async with self.engine.begin() as conn:
            rows = (await conn.execute(query)).all()
            staged = []
            for row in rows:
                await conn.execute(reset_for_redelivery(row.id))
                endpoint = endpoint_key(row.endpoint_id, row.url)
                message = delivery_outgoing(self.names, row.id, row.request_id, endpoint, operator=True)
                staged += await PortableOutbox(conn.engine).stage(conn, [message])
        await self.outbox.publish(staged)
        return [row.id for row in rows]


def reset_for_redelivery(delivery_id: str) -> Update:
    """A delivery made pending and due now with a fresh retry budget. Its new `updated_at` tells an attempt in
    flight, when it is recorded, that an operator acted meanwhile (`webhook_store.recorded_update`)."""
    return (
        update(DELIVERIES)
        .where(DELIVERIES.c.id == delivery_id)
        .values(status=DeliveryStatus.PENDING, budget_used=0, next_attempt_at=None, updated_at=utcnow())
    )
