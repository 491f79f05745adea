"""The deliveries store's portable statements, each a status change or a lease behind its guard: the claim (a
compare-and-set on pending, due and unleased), the record (fenced by the claim's attempt count), a lease given
back (fenced alike), and a redelivery."""

from datetime import datetime
from typing import Any

from sqlalchemy import Column, ColumnElement, Update, bindparam, case, literal, update

from app.core.statuses import DeliveryStatus
from app.models.rows import DeliveryRow
from app.models.setwise import per_row, per_row_of
from app.models.tables import DELIVERIES
from app.models.types import utcnow
from app.stores.deliveries import Recording

# The lease by compare-and-set: pending, due, and not leased by a live worker.
CLAIM = (
    update(DELIVERIES)
    .where(DELIVERIES.c.id.in_(bindparam("ids", expanding=True)), DELIVERIES.c.status == DeliveryStatus.PENDING)
    .where(DELIVERIES.c.lease_until.is_(None) | (DELIVERIES.c.lease_until < bindparam("now")))
    .where(DELIVERIES.c.next_attempt_at.is_(None) | (DELIVERIES.c.next_attempt_at <= bindparam("now")))
    .values(lease_until=bindparam("lease"), updated_at=bindparam("now"))
    .returning(*DELIVERIES.c)
)


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
        return planned if r.status == DeliveryStatus.SUCCEEDED else case((kept(r), planned), else_=column)

    return (
        update(DELIVERIES)
        .where(*fenced([r.delivery for r in plans.values()]))
        .values(
            status=per_row_of(key, {i: unless_reset(r, r.status, columns.status) for i, r in plans.items()}),
            attempt_count=columns.attempt_count + 1,
            budget_used=per_row_of(
                key, {i: case((kept(r), columns.budget_used + 1), else_=columns.budget_used) for i, r in plans.items()}
            ),
            next_attempt_at=per_row_of(
                key, {i: unless_reset(r, r.next_at, columns.next_attempt_at) for i, r in plans.items()}
            ),
            lease_until=None,
            updated_at=now,
        )
        .returning(key)
    )


def released(claimed: list[DeliveryRow]) -> Update:
    """The leases of these deliveries given back, where each is still as it was claimed."""
    return update(DELIVERIES).where(*fenced(claimed)).values(lease_until=None)


def fenced(claimed: list[DeliveryRow]) -> list[ColumnElement[bool]]:
    """Each row as it was claimed: a newer claim (a higher attempt count) owns it instead."""
    counts = {d["id"]: d["attempt_count"] for d in claimed}
    key = DELIVERIES.c.id
    return [key.in_(counts), DELIVERIES.c.attempt_count == per_row(key, DELIVERIES.c.attempt_count, counts)]


def reset_for_redelivery(delivery_id: str) -> Update:
    """A delivery made pending and due now with a fresh retry budget. Its new `updated_at` tells an attempt in
    flight, when it is recorded, that an operator acted meanwhile (`recorded_update`)."""
    return (
        update(DELIVERIES)
        .where(DELIVERIES.c.id == delivery_id)
        .values(status=DeliveryStatus.PENDING, budget_used=0, next_attempt_at=None, updated_at=utcnow())
    )
