"""The webhook worker's database side: fan out events, claim a delivery by lease, record each attempt."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy import Column, ColumnElement, Update, bindparam, case, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import Names
from app.core.secret_box import SecretBox
from app.core.statuses import DeliveryOutcome, DeliveryStatus, TrailEvent
from app.models import pg_batch
from app.models.rows import DeliveryRow, EndpointKeys, delivery_row, endpoint_keys
from app.models.setwise import per_row, per_row_of
from app.models.tables import ATTEMPTS, DELIVERIES, ENDPOINTS
from app.models.types import utcnow
from app.services import deliveries
from app.services.breakers import EndpointResult, judge_endpoints
from app.services.webhooks import client_secret
from app.stores.jobs.moves import Row
from app.stores.jobs.portable import INSERT_EVENT
from app.stores.outbox import Pending
from app.stores.postgres import PgConnections
from app.workers.retry_policy import DeadLetter, Retry
from app.workers.verdicts import Defer, Drop, ToDeadLetters

BODY_LIMIT = 4096
Event = tuple[Row, bytes, str | None]  # a job event, its body as published, its request id
GONE = 410


@dataclass(frozen=True)
class Send:
    """Ours to attempt: the delivery as claimed, the secrets to sign with (newest first), and whether its
    endpoint was failing when claimed (if not, a success leaves the endpoint's row alone)."""

    delivery: DeliveryRow
    secrets: list[str]
    failing: bool = False


@dataclass(frozen=True)
class Attempt:
    status_code: int | None
    duration_ms: float
    error: str | None
    response_body: str | None
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


Claim = Send | Drop | ToDeadLetters | Defer

# The lease by compare-and-set: pending, due, and not leased by a live worker.
CLAIM = (
    update(DELIVERIES)
    .where(DELIVERIES.c.id.in_(bindparam("ids", expanding=True)), DELIVERIES.c.status == DeliveryStatus.PENDING)
    .where(DELIVERIES.c.lease_until.is_(None) | (DELIVERIES.c.lease_until < bindparam("now")))
    .where(DELIVERIES.c.next_attempt_at.is_(None) | (DELIVERIES.c.next_attempt_at <= bindparam("now")))
    .values(lease_until=bindparam("lease"), updated_at=bindparam("now"))
    .returning(*DELIVERIES.c)
)


@dataclass(frozen=True)
class Recording:
    """An attempt to log: the delivery as claimed, the attempt, and what follows it (None: it succeeded)."""

    send: Send
    attempt: Attempt
    plan: Retry | DeadLetter | None

    @property
    def delivery(self) -> DeliveryRow:
        return self.send.delivery


@dataclass(frozen=True)
class WebhookStore:
    """Set-based (rule 17): each method takes a batch and does its work in one transaction."""

    engine: AsyncEngine
    names: Names
    box: SecretBox
    lease_seconds: float
    disable_after_seconds: float
    connections: PgConnections | None = None

    def __post_init__(self) -> None:
        if self.connections is None:  # a store of its own: it keeps no connection between batches
            object.__setattr__(self, "connections", PgConnections(self.engine, keep=False))

    def _autocommit(self) -> Any:
        assert self.connections is not None
        return self.connections.autocommit()

    async def fan_out(self, events: list[Event]) -> list[list[Pending]]:
        """One delivery per matching endpoint (and callback URL) for each event; a twice-published event adds
        none. The messages to publish, one list per event."""
        if pg_batch.applies(self.engine):  # the endpoints read, then one statement that skips what is there
            async with self._autocommit() as conn:
                return await self._fan_out_on(conn, events)
        for _ in range(2):
            try:
                async with self.engine.begin() as conn:
                    return await self._fan_out_on(conn, events)
            except IntegrityError:
                continue  # another worker fanned the same event out at the same moment: look again
        raise RuntimeError("fan-out kept racing another worker on the same events")

    async def _fan_out_on(self, conn: AsyncConnection, events: list[Event]) -> list[list[Pending]]:
        targets = await deliveries.targets_for(conn, [event for event, _, _ in events])
        fanned = [
            deliveries.Fanned(event, body, found, request_id)
            for (event, body, request_id), found in zip(events, targets, strict=True)
        ]
        return await deliveries.stage(conn, self.names, fanned)

    async def claim(self, delivery_ids: list[str]) -> list[Claim]:
        """Take the deliveries' leases by one compare-and-set, so two live workers never send one at once."""
        now = utcnow()
        lease = now + timedelta(seconds=self.lease_seconds)
        ids = list(set(delivery_ids))
        if pg_batch.applies(self.engine):  # the claim and the endpoints' rows: one statement, no transaction
            async with self._autocommit() as conn:
                taken, endpoints = await pg_batch.claim_deliveries(conn, ids, now, lease)
            seen, callers = await self._read_rest(delivery_ids, taken)
        else:
            async with self.engine.begin() as conn:
                result = await conn.execute(CLAIM, {"ids": ids, "now": now, "lease": lease})
                taken = [delivery_row(row._mapping) for row in result]
                seen = await _read(conn, set(delivery_ids) - {row["id"] for row in taken})
                endpoints = await _endpoints(conn, taken)
                callers = await self._callers(conn, taken)
        secrets, failing = self._secrets(taken, endpoints, callers, now)
        ours = {row["id"]: row for row in taken}
        verdicts: list[Claim] = []
        for delivery_id in delivery_ids:
            delivery = ours.pop(delivery_id, None)  # a duplicate message in the batch: the first one sends
            if delivery is not None:
                verdicts.append(Send(delivery, secrets[delivery_id], delivery["endpoint_id"] in failing))
            elif delivery_id in seen:
                verdicts.append(_not_ours(seen[delivery_id], now))
            elif delivery_id in secrets:  # a second message for a delivery this batch claimed
                verdicts.append(Defer(self.lease_seconds, in_flight=True))
            else:
                verdicts.append(Drop("no such delivery"))
        return verdicts

    async def _read_rest(
        self, delivery_ids: list[str], taken: list[DeliveryRow]
    ) -> tuple[dict[str, DeliveryRow], dict[str, str]]:
        """What the one-statement claim leaves to read: the deliveries it did not take, and the secrets of the
        clients whose callback deliveries it took (in a transaction: a missing secret is created)."""
        others = set(delivery_ids) - {row["id"] for row in taken}
        if not others and all(d["endpoint_id"] is not None for d in taken):
            return {}, {}
        async with self.engine.begin() as conn:
            return await _read(conn, others), await self._callers(conn, taken)

    async def _callers(self, conn: AsyncConnection, claimed: list[DeliveryRow]) -> dict[str, str]:
        """The default secret of each client whose callback delivery was claimed."""
        callers = {d["client_id"]: "" for d in claimed if d["endpoint_id"] is None}
        for client_id in callers:
            callers[client_id] = await client_secret(conn, self.box, client_id)
        return callers

    def _secrets(
        self, claimed: list[DeliveryRow], endpoints: dict[str, EndpointKeys], callers: dict[str, str], now: datetime
    ) -> tuple[dict[str, list[str]], set[str]]:
        """Each claimed delivery's signing secrets, newest first (none when its endpoint is gone or disabled),
        and the endpoints that are failing."""
        found: dict[str, list[str]] = {}
        for delivery in claimed:
            if delivery["endpoint_id"] is None:
                found[delivery["id"]] = [callers[delivery["client_id"]]]
                continue
            endpoint = endpoints.get(delivery["endpoint_id"])
            if endpoint is None or endpoint["deleted_at"] is not None or not endpoint["active"]:
                found[delivery["id"]] = []
                continue
            secrets = [self.box.open(endpoint["secret"])]
            expires = endpoint["previous_expires_at"]
            if endpoint["previous_secret"] and expires and expires > now:
                secrets.append(self.box.open(endpoint["previous_secret"]))
            found[delivery["id"]] = secrets
        return found, {i for i, row in endpoints.items() if row["failing_since"] is not None}

    async def release(self, claimed: list[DeliveryRow]) -> None:
        """Give leases back without an attempt (the endpoint's breaker or cap said wait)."""
        if not claimed:
            return
        async with self.engine.begin() as conn:
            await conn.execute(released(claimed))

    async def abandon(self, claimed: list[DeliveryRow], why: str) -> None:
        """The endpoints are gone or disabled: fail the deliveries without sending."""
        if not claimed:
            return
        now = utcnow()
        async with self.engine.begin() as conn:
            await conn.execute(
                update(DELIVERIES)
                .where(*_fenced(claimed))
                .values(status=DeliveryStatus.FAILED, lease_until=None, updated_at=now)
            )
            trail = [
                _trail(d["job_id"], {"delivery_id": d["id"], "outcome": DeliveryOutcome.FAILED, "error": why}, now)
                for d in claimed
                if d["job_id"]
            ]
            if trail:
                await _audit(conn, trail)

    async def give_up(self, delivery_id: str, why: str) -> bool:
        """A pending delivery whose message the service failed to process three times: failed, with its audit row,
        never sent; False when it is no longer pending (or there is no such delivery)."""
        now = utcnow()
        async with self.engine.begin() as conn:
            job_id = (
                await conn.execute(
                    update(DELIVERIES)
                    .where(DELIVERIES.c.id == delivery_id, DELIVERIES.c.status == DeliveryStatus.PENDING)
                    .values(status=DeliveryStatus.FAILED, lease_until=None, updated_at=now)
                    .returning(DELIVERIES.c.job_id)
                )
            ).first()
            if job_id is not None and job_id[0]:
                detail = {"delivery_id": delivery_id, "outcome": DeliveryOutcome.FAILED, "error": why}
                await _audit(conn, [_trail(job_id[0], detail, now)])
        return job_id is not None

    async def record(self, batch: list[Recording]) -> list[bool]:
        """Log each attempt and its delivery's new state, fenced by the attempt count it was claimed with; False
        for a delivery a newer claim owns. One transaction for the batch."""
        now = utcnow()
        plans = {r.delivery["id"]: r for r in batch}
        status = {i: _status(r.plan) for i, r in plans.items()}
        if pg_batch.applies(self.engine) and not any(_judged(r) for r in plans.values()):
            recorded = await self._record_at_once(plans, status, now)
            return [r.delivery["id"] in recorded and plans[r.delivery["id"]] is r for r in batch]
        async with self.engine.begin() as conn:
            if pg_batch.applies(conn):
                recorded = await pg_batch.record_deliveries(conn, _changes(plans, status), now)
            else:
                recorded = set((await conn.execute(recorded_update(plans, now))).scalars())
            mine = [r for i, r in plans.items() if i in recorded]
            if mine:
                attempts = [_attempt_row(r, now) for r in mine]
                if pg_batch.applies(conn):
                    await pg_batch.insert_attempts(conn, attempts)
                else:
                    await conn.execute(insert(ATTEMPTS), attempts)
                trail = [
                    _trail(r.delivery["job_id"], _detail(r, status[r.delivery["id"]]), now)
                    for r in mine
                    if r.delivery["job_id"]
                ]
                if trail:
                    await _audit(conn, trail)
                judged = [
                    EndpointResult(endpoint_id, r.attempt.ok, r.attempt.status_code == GONE)
                    for r in mine
                    if (endpoint_id := r.delivery["endpoint_id"]) and _judged(r)
                ]
                if judged:  # a success at an endpoint that was not failing changes nothing
                    for endpoint_id, reason in await judge_endpoints(conn, judged, now, self.disable_after_seconds):
                        logger.warning("webhook endpoint {} disabled: {}", endpoint_id, reason)
        return [r.delivery["id"] in recorded and plans[r.delivery["id"]] is r for r in batch]

    async def _record_at_once(self, plans: dict[str, Recording], status: dict[str, str], now: datetime) -> set[str]:
        """`record` on PostgreSQL when no endpoint needs judging (every attempt a success at a healthy endpoint,
        the common case): one statement, a transaction by itself; the ids that were still ours."""
        changes = _changes(plans, status)
        trail = [
            {**_trail(r.delivery["job_id"], _detail(r, status[i]), now), "delivery_id": i}
            for i, r in plans.items()
            if r.delivery["job_id"]
        ]
        attempts = [_attempt_row(r, now) for r in plans.values()]
        async with self._autocommit() as conn:
            return await pg_batch.record_deliveries_logged(conn, changes, attempts, trail, now)


def _changes(plans: dict[str, Recording], status: dict[str, str]) -> list[Row]:
    """Each delivery's new state for the set-based record: its fencing count and its `updated_at` as claimed."""
    return [
        {
            "id": i,
            "claimed": r.delivery["attempt_count"],
            "claimed_at": r.delivery["updated_at"],
            "status": status[i],
            "next_at": _next_at(r.plan),
        }
        for i, r in plans.items()
    ]


def _judged(recording: Recording) -> bool:
    """Whether an attempt feeds its endpoint's health: a failure, or any answer from an endpoint failing already
    (a success at a healthy endpoint changes nothing)."""
    return bool(recording.delivery["endpoint_id"]) and (recording.send.failing or not recording.attempt.ok)


async def _read(conn: AsyncConnection, delivery_ids: set[str]) -> dict[str, DeliveryRow]:
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


def recorded_update(plans: dict[str, Recording], now: datetime) -> Update:
    """The portable record: each delivery (by id) to the state its attempt leads to, behind its fencing check,
    RETURNING the ids it took. A row changed since its claim (an operator's redelivery while the attempt was in
    flight) keeps the operator's status, next attempt and budget, unless the attempt succeeded; the attempt is
    still counted."""
    key, columns = DELIVERIES.c.id, DELIVERIES.c

    def kept(r: Recording) -> ColumnElement[bool]:  # the row as its claim left it
        return columns.updated_at == literal(r.delivery["updated_at"], columns.updated_at.type)

    def unless_reset(r: Recording, value: object, column: Column[Any]) -> ColumnElement[Any]:
        planned = literal(value, column.type)
        return planned if r.plan is None else case((kept(r), planned), else_=column)

    return (
        update(DELIVERIES)
        .where(*_fenced([r.delivery for r in plans.values()]))
        .values(
            status=per_row_of(key, {i: unless_reset(r, _status(r.plan), columns.status) for i, r in plans.items()}),
            attempt_count=columns.attempt_count + 1,
            budget_used=per_row_of(
                key, {i: case((kept(r), columns.budget_used + 1), else_=columns.budget_used) for i, r in plans.items()}
            ),
            next_attempt_at=per_row_of(
                key, {i: unless_reset(r, _next_at(r.plan), columns.next_attempt_at) for i, r in plans.items()}
            ),
            lease_until=None,
            updated_at=now,
        )
        .returning(key)
    )


def released(claimed: list[DeliveryRow]) -> Update:
    """The leases of these deliveries given back, where each is still as it was claimed."""
    return update(DELIVERIES).where(*_fenced(claimed)).values(lease_until=None)


def _fenced(claimed: list[DeliveryRow]) -> list[ColumnElement[bool]]:
    """Each row as it was claimed: a newer claim (a higher attempt count) owns it instead."""
    counts = {d["id"]: d["attempt_count"] for d in claimed}
    key = DELIVERIES.c.id
    return [key.in_(counts), DELIVERIES.c.attempt_count == per_row(key, DELIVERIES.c.attempt_count, counts)]


def _status(plan: Retry | DeadLetter | None) -> str:
    if plan is None:
        return DeliveryStatus.SUCCEEDED
    return DeliveryStatus.FAILED if isinstance(plan, DeadLetter) else DeliveryStatus.PENDING


def _next_at(plan: Retry | DeadLetter | None) -> datetime | None:
    return plan.next_attempt_at if isinstance(plan, Retry) else None


def _attempt_row(recording: Recording, now: datetime) -> Row:
    attempt = recording.attempt
    return {
        "delivery_id": recording.delivery["id"],
        "attempt": recording.delivery["attempt_count"] + 1,
        "status_code": attempt.status_code,
        "duration_ms": attempt.duration_ms,
        "error": _text(attempt.error, 1000),
        "response_body": _text(attempt.response_body, BODY_LIMIT),
        "created_at": now,
        "next_attempt_at": _next_at(recording.plan),
    }


def _text(value: str | None, limit: int) -> str | None:
    """What a receiver answered, as a text column holds it: cut to `limit`, NUL characters replaced (PostgreSQL
    refuses them in text, and one odd answer must not make the attempt unrecordable)."""
    return value[:limit].replace("\x00", "\ufffd") if value else None


def _trail(job_id: str, detail: Row, now: datetime) -> Row:
    return {"job_id": job_id, "event": TrailEvent.DELIVERY, "detail": detail, "created_at": now}


def _not_ours(delivery: DeliveryRow, now: datetime) -> Drop | ToDeadLetters | Defer:
    if delivery["status"] == DeliveryStatus.SUCCEEDED:
        return Drop("delivery already succeeded")
    if delivery["status"] == DeliveryStatus.FAILED:
        return ToDeadLetters([])
    lease, due = delivery["lease_until"], delivery["next_attempt_at"]
    waits = [t for t in (lease, due) if t is not None and t > now]
    in_flight = lease is not None and lease > now and (due is None or due <= now)
    return Defer(max((t - now).total_seconds() for t in waits) if waits else 0.1, in_flight)


def _detail(recording: Recording, status: str) -> Row:
    delivery, attempt = recording.delivery, recording.attempt
    number = delivery["attempt_count"] + 1
    outcome = DeliveryOutcome.RETRYING if status == DeliveryStatus.PENDING else DeliveryOutcome(status)
    return {
        "delivery_id": delivery["id"],
        "webhook_id": delivery["endpoint_id"],
        "url": delivery["url"],
        "event_type": delivery["event_type"],
        "attempt": number,
        "status_code": attempt.status_code,
        "outcome": outcome,
        **({"error": attempt.error} if attempt.error else {}),
    }


async def _audit(conn: AsyncConnection, rows: list[Row]) -> None:
    if pg_batch.applies(conn):
        await pg_batch.insert_events(conn, rows)
    else:
        await conn.execute(INSERT_EVENT, rows)
