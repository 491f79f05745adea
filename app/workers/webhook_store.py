"""The webhook worker's database side: fan out events, claim a delivery by lease, record each attempt."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from loguru import logger
from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import Names
from app.core.secret_box import SecretBox
from app.core.statuses import TrailEvent
from app.models.tables import ATTEMPTS, DELIVERIES, ENDPOINTS
from app.models.types import utcnow
from app.services import deliveries
from app.services.deliveries import DeliveryStatus
from app.services.outbox import Pending
from app.services.transitions import Row, audit
from app.services.webhooks import client_secret
from app.workers.job_store import Defer, Drop, ToDeadLetters
from app.workers.retry_policy import DeadLetter, Retry

BODY_LIMIT = 4096
GONE = 410


@dataclass(frozen=True)
class Send:
    """Ours to attempt: the delivery as claimed and the secrets to sign with, newest first."""

    delivery: Row
    secrets: list[str]


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


@dataclass(frozen=True)
class WebhookStore:
    engine: AsyncEngine
    names: Names
    box: SecretBox
    lease_seconds: float
    disable_after_seconds: float

    async def fan_out(self, event: Row, body: bytes, request_id: str | None) -> list[Pending]:
        """One delivery per matching endpoint (and callback URL); a twice-published event adds none."""
        for _ in range(2):
            try:
                async with self.engine.begin() as conn:
                    targets = await deliveries.targets_for(conn, event)
                    return await deliveries.stage(conn, self.names, event, body, targets, request_id)
            except IntegrityError:
                continue  # another worker fanned the same event out at the same moment: look again
        return []

    async def claim(self, delivery_id: str) -> Send | Drop | ToDeadLetters | Defer:
        """Take the delivery's lease by compare-and-set, so two live workers never send it at once."""
        now = utcnow()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery_id, DELIVERIES.c.status == DeliveryStatus.PENDING)
                .where(DELIVERIES.c.lease_until.is_(None) | (DELIVERIES.c.lease_until < now))
                .where(DELIVERIES.c.next_attempt_at.is_(None) | (DELIVERIES.c.next_attempt_at <= now))
                .values(lease_until=now + timedelta(seconds=self.lease_seconds), updated_at=now)
            )
            row = (await conn.execute(select(DELIVERIES).where(DELIVERIES.c.id == delivery_id))).first()
            if row is None:
                return Drop("no such delivery")
            delivery = dict(row._mapping)
            if result.rowcount == 1:
                return Send(delivery, await self._secrets(conn, delivery, now))
        return _not_ours(delivery, now)

    async def _secrets(self, conn: AsyncConnection, delivery: Row, now: datetime) -> list[str]:
        if delivery["endpoint_id"] is None:
            return [await client_secret(conn, self.box, delivery["client_id"])]
        endpoint = (await conn.execute(select(ENDPOINTS).where(ENDPOINTS.c.id == delivery["endpoint_id"]))).one()
        if endpoint.deleted_at is not None or not endpoint.active:
            return []
        secrets = [self.box.open(endpoint.secret)]
        if endpoint.previous_secret and endpoint.previous_expires_at and endpoint.previous_expires_at > now:
            secrets.append(self.box.open(endpoint.previous_secret))
        return secrets

    async def release(self, delivery: Row) -> None:
        """Give the lease back without an attempt (the endpoint's breaker or cap said wait)."""
        async with self.engine.begin() as conn:
            await conn.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery["id"], DELIVERIES.c.attempt_count == delivery["attempt_count"])
                .values(lease_until=None)
            )

    async def abandon(self, delivery: Row, why: str) -> None:
        """The endpoint is gone or disabled: fail the delivery without sending."""
        async with self.engine.begin() as conn:
            await conn.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery["id"], DELIVERIES.c.attempt_count == delivery["attempt_count"])
                .values(status=DeliveryStatus.FAILED, lease_until=None, updated_at=utcnow())
            )
            if delivery["job_id"]:
                detail = {"delivery_id": delivery["id"], "outcome": "failed", "error": why}
                await audit(conn, delivery["job_id"], TrailEvent.DELIVERY, detail, utcnow())

    async def record(self, delivery: Row, attempt: Attempt, plan: Retry | DeadLetter | None) -> bool:
        """Log the attempt and the delivery's new state, fenced by the attempt count we claimed with."""
        now = utcnow()
        number = delivery["attempt_count"] + 1
        status = DeliveryStatus.SUCCEEDED if plan is None else DeliveryStatus.PENDING
        if isinstance(plan, DeadLetter):
            status = DeliveryStatus.FAILED
        next_at = plan.next_attempt_at if isinstance(plan, Retry) else None
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(DELIVERIES)
                .where(DELIVERIES.c.id == delivery["id"], DELIVERIES.c.attempt_count == delivery["attempt_count"])
                .values(
                    status=status,
                    attempt_count=number,
                    budget_used=delivery["budget_used"] + 1,
                    next_attempt_at=next_at,
                    lease_until=None,
                    updated_at=now,
                )
            )
            if result.rowcount != 1:
                return False
            await conn.execute(
                insert(ATTEMPTS).values(
                    delivery_id=delivery["id"],
                    attempt=number,
                    status_code=attempt.status_code,
                    duration_ms=attempt.duration_ms,
                    error=attempt.error[:1000] if attempt.error else None,
                    response_body=attempt.response_body[:BODY_LIMIT] if attempt.response_body else None,
                    created_at=now,
                    next_attempt_at=next_at,
                )
            )
            if delivery["job_id"]:
                await audit(
                    conn, delivery["job_id"], TrailEvent.DELIVERY, _detail(delivery, number, attempt, status), now
                )
            if delivery["endpoint_id"]:
                await self._judge_endpoint(conn, delivery["endpoint_id"], attempt, now)
        return True

    async def _judge_endpoint(self, conn: AsyncConnection, endpoint_id: str, attempt: Attempt, now: datetime) -> None:
        """Track how long the endpoint has failed everything; disable it when gone (410) or failing too long."""
        where = ENDPOINTS.c.id == endpoint_id
        if attempt.ok:
            await conn.execute(
                update(ENDPOINTS).where(where, ENDPOINTS.c.failing_since.is_not(None)).values(failing_since=None)
            )
            return
        await conn.execute(
            update(ENDPOINTS).where(where, ENDPOINTS.c.failing_since.is_(None)).values(failing_since=now)
        )
        if attempt.status_code == GONE:
            reason = f"the endpoint answered 410 Gone at {_stamp(now)}"
        else:
            cutoff = now - timedelta(seconds=self.disable_after_seconds)
            since = (await conn.execute(select(ENDPOINTS.c.failing_since).where(where))).scalar_one_or_none()
            if since is None or since > cutoff:
                return
            reason = f"every attempt failed from {_stamp(since)} to {_stamp(now)}"
        result = await conn.execute(
            update(ENDPOINTS)
            .where(where, ENDPOINTS.c.active.is_(True))
            .values(active=False, disabled_reason=reason, updated_at=now)
        )
        if result.rowcount:
            logger.warning("webhook endpoint {} disabled: {}", endpoint_id, reason)


def _not_ours(delivery: Row, now: datetime) -> Drop | ToDeadLetters | Defer:
    if delivery["status"] == DeliveryStatus.SUCCEEDED:
        return Drop("delivery already succeeded")
    if delivery["status"] == DeliveryStatus.FAILED:
        return ToDeadLetters([])
    waits = [t for t in (delivery["lease_until"], delivery["next_attempt_at"]) if t is not None and t > now]
    return Defer(max((t - now).total_seconds() for t in waits) if waits else 0.1)


def _detail(delivery: Row, number: int, attempt: Attempt, status: str) -> Row:
    outcome = "retrying" if status == DeliveryStatus.PENDING else status
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


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")
