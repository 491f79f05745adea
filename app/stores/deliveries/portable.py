"""The deliveries store on any database SQLAlchemy speaks: SQLite, MSSQL (by rendering, DESIGN rule 14) and
PostgreSQL; `postgres.PgDeliveries` replaces its hot statements there."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.messages import delivery_outgoing, endpoint_key
from app.core.names import Names
from app.core.secret_box import SecretBox
from app.core.statuses import DeliveryStatus
from app.models.rows import AttemptRow, DeliveryRow, EndpointKeys, TrailRow, delivery_row, endpoint_keys
from app.models.tables import ATTEMPTS, DELIVERIES, ENDPOINTS
from app.models.types import utcnow
from app.stores.deliveries import Event, Fanned, Judge, Recording, Taken
from app.stores.deliveries.rows import (
    attempt_row,
    clients_of,
    failed_trail,
    messages_of,
    new_rows,
    recorded_trail,
    targets_of,
    wanted_ids,
)
from app.stores.deliveries.secrets import callers, signing
from app.stores.deliveries.statements import CLAIM, fenced, recorded_update, released, reset_for_redelivery
from app.stores.jobs import JobStore
from app.stores.outbox import OutboxStore, Pending

ROWS_PER_INSERT = 100  # 17 columns a row: within MSSQL's 2,100 parameters per statement
SUBSCRIBED = select(
    ENDPOINTS.c.id, ENDPOINTS.c.client_id, ENDPOINTS.c.url, ENDPOINTS.c.events, ENDPOINTS.c.job_type, ENDPOINTS.c.job_id
)


class PortableDeliveries:
    def __init__(self, engine: AsyncEngine, names: Names, outbox: OutboxStore, jobs: JobStore, box: SecretBox) -> None:
        self.engine = engine
        self.names = names
        self.outbox = outbox
        self.jobs = jobs  # its audit rows: a delivery's outcome is an entry in its job's trail
        self.box = box

    async def fan_out(self, events: list[Event]) -> list[list[Pending]]:
        """One delivery per matching endpoint (and callback URL) for each event, in one transaction."""
        for _ in range(2):
            try:
                async with self.engine.begin() as conn:
                    return await self._fan_out_on(conn, events)
            except IntegrityError:
                continue  # another worker fanned the same event out at the same moment: look again
        raise RuntimeError("fan-out kept racing another worker on the same events")

    async def _fan_out_on(self, conn: AsyncConnection, events: list[Event]) -> list[list[Pending]]:
        jobs_events = [event for event, _, _ in events]
        clients = clients_of(jobs_events)
        targets = targets_of(jobs_events, await self._subscribed(conn, sorted(clients)) if clients else [])
        fanned = [
            Fanned.of(event, body, found, request_id)
            for (event, body, request_id), found in zip(events, targets, strict=True)
        ]
        return await self.stage(conn, fanned)

    async def _subscribed(self, conn: AsyncConnection, client_ids: list[str]) -> Sequence[Mapping[Any, Any]]:
        """The active endpoints of these clients, in the order they were registered."""
        active = (ENDPOINTS.c.client_id.in_(client_ids), ENDPOINTS.c.active.is_(True), ENDPOINTS.c.deleted_at.is_(None))
        query = SUBSCRIBED.where(*active).order_by(ENDPOINTS.c.created_at, ENDPOINTS.c.id)
        return (await conn.execute(query)).mappings().all()

    async def stage(self, conn: AsyncConnection, fanned: list[Fanned]) -> list[list[Pending]]:
        """The deliveries these events do not have yet (looked for first), inserted a chunk a statement, each with
        its message staged; one list of staged messages per event (empty when it had them all)."""
        wanted = wanted_ids(fanned)
        every = {i for ids in wanted for i in ids}
        if not every:
            return [[] for _ in fanned]
        existing = set((await conn.execute(select(DELIVERIES.c.id).where(DELIVERIES.c.id.in_(every)))).scalars())
        rows, owners = new_rows(fanned, wanted, existing, utcnow())
        for start in range(0, len(rows), ROWS_PER_INSERT):
            await conn.execute(insert(DELIVERIES).values(rows[start : start + ROWS_PER_INSERT]))
        staged: list[list[Pending]] = [[] for _ in fanned]
        messages = messages_of(self.names, rows, owners, fanned)
        for owner, pending in zip(owners, await self.outbox.stage(conn, messages), strict=True):
            staged[owner].append(pending)
        return staged

    async def claim(self, delivery_ids: list[str], now: datetime, lease: datetime) -> Taken:
        """The lease by one compare-and-set; the others, the endpoints' rows and the callers' secrets read in the
        same transaction."""
        async with self.engine.begin() as conn:
            result = await conn.execute(CLAIM, {"ids": list(set(delivery_ids)), "now": now, "lease": lease})
            claimed = [delivery_row(row._mapping) for row in result]
            seen = await read_deliveries(conn, set(delivery_ids) - {row["id"] for row in claimed})
            endpoints = await _endpoints(conn, claimed)
            secrets, failing = signing(self.box, claimed, endpoints, await callers(conn, self.box, claimed), now)
        return Taken(claimed, secrets, failing, seen)

    async def release(self, claimed: list[DeliveryRow]) -> None:
        """Give leases back without an attempt (the endpoint's breaker or cap said wait)."""
        if not claimed:
            return
        async with self.engine.begin() as conn:
            await conn.execute(released(claimed))

    async def abandon(self, claimed: list[DeliveryRow], why: str) -> None:
        """Claimed deliveries (each as its claim left it) -> failed without sending: their endpoints are gone."""
        if not claimed:
            return
        now = utcnow()
        async with self.engine.begin() as conn:
            failed = dict(status=DeliveryStatus.FAILED, lease_until=None, updated_at=now)
            await conn.execute(update(DELIVERIES).where(*fenced(claimed)).values(**failed))
            await self._audit(conn, failed_trail([(d["id"], d["job_id"]) for d in claimed], why, now))

    async def give_up(self, delivery_id: str, why: str) -> bool:
        """A pending delivery -> failed, never sent, with its audit row; False when it is no longer pending."""
        now = utcnow()
        async with self.engine.begin() as conn:
            failed = (
                await conn.execute(
                    update(DELIVERIES)
                    .where(DELIVERIES.c.id == delivery_id, DELIVERIES.c.status == DeliveryStatus.PENDING)
                    .values(status=DeliveryStatus.FAILED, lease_until=None, updated_at=now)
                    .returning(DELIVERIES.c.job_id)
                )
            ).first()
            if failed is not None:
                await self._audit(conn, failed_trail([(delivery_id, failed.job_id)], why, now))
        return failed is not None

    async def _audit(self, conn: AsyncConnection, trail: list[TrailRow]) -> None:
        if trail:
            await self.jobs.audit(conn, trail)

    async def record(self, batch: list[Recording], judge: Judge) -> list[bool]:
        """Log each attempt and its delivery's new state, fenced by the attempt count it was claimed with; False
        for a delivery a newer claim owns (or a second recording of one delivery in the batch)."""
        plans = {r.delivery["id"]: r for r in batch}
        recorded = await self._record(plans, judge, utcnow())
        return [r.delivery["id"] in recorded and plans[r.delivery["id"]] is r for r in batch]

    async def _record(self, plans: dict[str, Recording], judge: Judge, now: datetime) -> set[str]:
        """The deliveries moved behind their fencing check, then the attempt and audit rows of those still ours,
        and their endpoints judged, in one transaction; the ids that were still ours."""
        async with self.engine.begin() as conn:
            recorded = await self._move(conn, plans, now)
            mine = [r for i, r in plans.items() if i in recorded]
            if mine:
                await self._insert_attempts(conn, [attempt_row(r, now) for r in mine])
                await self._audit(conn, recorded_trail(mine, now))
                judged = [r for r in mine if r.judged]
                if judged:  # a success at an endpoint that was not failing changes nothing
                    await judge(conn, judged, now)
        return recorded

    async def _move(self, conn: AsyncConnection, plans: dict[str, Recording], now: datetime) -> set[str]:
        return set((await conn.execute(recorded_update(plans, now))).scalars())

    async def _insert_attempts(self, conn: AsyncConnection, rows: list[AttemptRow]) -> None:
        await conn.execute(insert(ATTEMPTS), rows)

    async def redeliver(self, where: tuple[ColumnElement[bool], ...]) -> tuple[list[str], list[Pending]]:
        """The deliveries `where` selects -> pending, due now, with a fresh retry budget, one by one, each with an
        operator's message staged (at once, through an open circuit as its probe), in one transaction."""
        columns = (DELIVERIES.c.id, DELIVERIES.c.request_id, DELIVERIES.c.endpoint_id, DELIVERIES.c.url)
        async with self.engine.begin() as conn:
            rows = (await conn.execute(select(*columns).where(*where))).all()
            staged = []
            for row in rows:
                await conn.execute(reset_for_redelivery(row.id))
                endpoint = endpoint_key(row.endpoint_id, row.url)
                message = delivery_outgoing(self.names, row.id, row.request_id, endpoint, operator=True)
                staged += await self.outbox.stage(conn, [message])
        return [row.id for row in rows], staged


async def read_deliveries(conn: AsyncConnection, delivery_ids: set[str]) -> dict[str, DeliveryRow]:
    if not delivery_ids:
        return {}
    rows = await conn.execute(select(DELIVERIES).where(DELIVERIES.c.id.in_(delivery_ids)))
    return {row.id: delivery_row(row._mapping) for row in rows}


async def _endpoints(conn: AsyncConnection, claimed: list[DeliveryRow]) -> dict[str, EndpointKeys]:
    endpoint_ids = {d["endpoint_id"] for d in claimed if d["endpoint_id"] is not None}
    if not endpoint_ids:
        return {}
    rows = await conn.execute(select(ENDPOINTS).where(ENDPOINTS.c.id.in_(endpoint_ids)))
    return {row.id: endpoint_keys(row._mapping) for row in rows}
