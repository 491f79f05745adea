"""The deliveries store on PostgreSQL: the portable store with its hot statements replaced by array statements; a
fan-out, a claim and a batch of successes at healthy endpoints each one statement sent alone, a transaction by
itself."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.messages import loads
from app.core.names import Names
from app.core.secret_box import SecretBox
from app.models.rows import AttemptRow, DeliveryRow, EndpointKeys, delivery_row, endpoint_keys
from app.models.types import utcnow
from app.stores import postgres
from app.stores.deliveries import Event, Fanned, Judge, Recording, Taken
from app.stores.deliveries.portable import PortableDeliveries, read_deliveries
from app.stores.deliveries.postgres_sql import (
    CLAIM_DELIVERIES_WITH_ENDPOINTS,
    DELIVERY_NAMES,
    ENDPOINT_COLUMNS,
    INSERT_ATTEMPTS,
    RECORD_DELIVERIES,
    RECORD_DELIVERIES_LOGGED,
    STAGE_DELIVERIES,
    SUBSCRIBED_ENDPOINTS,
)
from app.stores.deliveries.rows import attempt_row, messages_of, new_rows, recorded_trail, wanted_ids
from app.stores.deliveries.secrets import callers, signing
from app.stores.jobs.postgres import PgJobs, event_columns
from app.stores.outbox import Pending, rows_of
from app.stores.outbox.postgres import PgOutbox, outbox_columns
from app.stores.postgres import PgConnections

ATTEMPT_COLUMNS = ("delivery_id", "attempt", "status_code", "duration_ms", "error", "response_body")


class PgDeliveries(PortableDeliveries):
    def __init__(
        self,
        engine: AsyncEngine,
        names: Names,
        outbox: PgOutbox,
        jobs: PgJobs,
        box: SecretBox,
        connections: PgConnections,
    ) -> None:
        super().__init__(engine, names, outbox, jobs, box)
        self.connections = connections

    async def fan_out(self, events: list[Event]) -> list[list[Pending]]:
        """The endpoints read, then one statement that skips the deliveries already there: no transaction."""
        async with self.connections.autocommit() as conn:
            return await self._fan_out_on(conn, events)

    async def _subscribed(self, conn: AsyncConnection, client_ids: list[str]) -> Sequence[Mapping[Any, Any]]:
        rows = [dict(row) for row in await postgres.rows(conn, SUBSCRIBED_ENDPOINTS, (client_ids,))]
        for row in rows:
            if isinstance(row["events"], str):
                row["events"] = loads(row["events"])
        return rows

    async def stage(self, conn: AsyncConnection, fanned: list[Fanned]) -> list[list[Pending]]:
        """The new deliveries and their messages as one statement: the deliveries already there are skipped by
        the unique index as it inserts (rule 10), and get no message."""
        wanted = wanted_ids(fanned)
        if not any(wanted):
            return [[] for _ in fanned]
        now = utcnow()
        rows, owners = new_rows(fanned, wanted, set(), now)
        messages = messages_of(self.names, rows, owners, fanned)
        outbox = outbox_columns(rows_of(messages, now))
        columns = (
            *_delivery_columns(rows),
            *outbox[:6],  # exchange, routing key, body, headers, priority, message id
            outbox[7],  # created_at
            [r["id"] for r in rows],
        )
        ids = {row["message_id"]: int(row["id"]) for row in await postgres.rows(conn, STAGE_DELIVERIES, columns)}
        staged: list[list[Pending]] = [[] for _ in fanned]
        for owner, message in zip(owners, messages, strict=True):
            if message.message_id in ids:  # not fanned out before
                staged[owner].append(Pending(ids[message.message_id], message))
        return staged

    async def claim(self, delivery_ids: list[str], now: datetime, lease: datetime) -> Taken:
        """The claim and the endpoints' rows in one statement, no transaction; then, only if there are any, the
        deliveries it did not take and the callers' secrets (in a transaction: a missing secret is created)."""
        async with self.connections.autocommit() as conn:
            claimed, endpoints = await _claim(conn, list(set(delivery_ids)), now, lease)
        others = set(delivery_ids) - {row["id"] for row in claimed}
        seen: dict[str, DeliveryRow] = {}
        secrets_of: dict[str, str] = {}
        if others or any(d["endpoint_id"] is None for d in claimed):
            async with self.engine.begin() as conn:
                seen, secrets_of = await read_deliveries(conn, others), await callers(conn, self.box, claimed)
        secrets, failing = signing(self.box, claimed, endpoints, secrets_of, now)
        return Taken(claimed, secrets, failing, seen)

    async def _record(self, plans: dict[str, Recording], judge: Judge, now: datetime) -> set[str]:
        if any(r.judged for r in plans.values()):
            return await super()._record(plans, judge, now)  # with this store's statements
        return await self._record_at_once(plans, now)

    async def _record_at_once(self, plans: dict[str, Recording], now: datetime) -> set[str]:
        """`record` when no endpoint needs judging (every attempt a success at a healthy endpoint, the common
        case): one statement, a transaction by itself; the ids that were still ours."""
        with_job = [r for r in plans.values() if r.delivery["job_id"]]
        attempts = [attempt_row(r, now) for r in plans.values()]
        columns = (
            *_changes(plans),
            now,
            *_attempt_columns(attempts, (*ATTEMPT_COLUMNS, "next_attempt_at")),
            [r.delivery["id"] for r in with_job],
            *event_columns(recorded_trail(with_job, now))[:3],  # job_id, event, detail
            [r.delivery["updated_at"] for r in plans.values()],
        )
        async with self.connections.autocommit() as conn:
            return {row["id"] for row in await postgres.rows(conn, RECORD_DELIVERIES_LOGGED, columns)}

    async def _move(self, conn: AsyncConnection, plans: dict[str, Recording], now: datetime) -> set[str]:
        claimed_at = [r.delivery["updated_at"] for r in plans.values()]
        return {row["id"] for row in await postgres.rows(conn, RECORD_DELIVERIES, (*_changes(plans), now, claimed_at))}

    async def _insert_attempts(self, conn: AsyncConnection, rows: list[AttemptRow]) -> None:
        names = (*ATTEMPT_COLUMNS, "created_at", "next_attempt_at")
        await postgres.rows(
            conn, INSERT_ATTEMPTS, tuple([cast(dict[str, Any], r)[name] for r in rows] for name in names)
        )


def _delivery_columns(rows: Sequence[Mapping[str, Any]]) -> tuple[list[Any], ...]:
    return tuple([r[name] for r in rows] for name in DELIVERY_NAMES)


def _changes(plans: dict[str, Recording]) -> tuple[list[Any], ...]:
    """Each delivery's id, fencing count (its attempt count as claimed), new status and next attempt, as arrays."""
    recordings = plans.values()
    return (
        list(plans),
        [r.delivery["attempt_count"] for r in recordings],
        [r.status for r in recordings],
        [r.next_at for r in recordings],
    )


async def _claim(
    conn: AsyncConnection, ids: list[str], now: datetime, lease: datetime
) -> tuple[list[DeliveryRow], dict[str, EndpointKeys]]:
    """The deliveries among `ids` that are pending, due and not leased, now leased: their rows after it, and
    their endpoints' rows by id."""
    taken: list[DeliveryRow] = []
    endpoints: dict[str, EndpointKeys] = {}
    for record in await postgres.rows(conn, CLAIM_DELIVERIES_WITH_ENDPOINTS, (ids, lease, now)):
        row = dict(record)
        endpoint = {name: row.pop(f"ep_{name}") for name in ENDPOINT_COLUMNS}
        if endpoint["id"] is not None:
            endpoints[endpoint["id"]] = endpoint_keys(endpoint)
        taken.append(delivery_row(row))
    return taken, endpoints


def _attempt_columns(rows: Sequence[AttemptRow], names: Sequence[str]) -> tuple[list[Any], ...]:
    """Attempt rows as one array per column named."""
    return tuple([cast(dict[str, Any], row)[name] for row in rows] for name in names)
