"""The outbox's rows (rule 2): messages staged in the caller's transaction, deleted once the broker confirmed
them, taken by the relay when nobody confirmed them in time."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.broker import Outgoing

ROWS_PER_STATEMENT = 500  # keeps every IN list within MSSQL's 2,100 parameters


@dataclass(frozen=True)
class Pending:
    """A committed outbox row and the message it holds."""

    id: int
    message: Outgoing
    job_id: str | None = None


class OutboxStore(Protocol):
    async def stage(
        self, conn: AsyncConnection, messages: list[Outgoing], job_ids: list[str | None] | None = None
    ) -> list[Pending]:
        """Stage messages in the caller's transaction, one statement; `job_ids` marks job messages (their
        publish queues the job)."""

    async def drop(self, conn: AsyncConnection, ids: list[int]) -> None:
        """Delete published rows, in the caller's transaction."""

    async def take_stale(self, older_than: datetime, hold_until: datetime, limit: int) -> list[Any]:
        """Rows staged before `older_than` that no relay holds, now held until `hold_until`, oldest first."""


def rows_of(messages: list[Outgoing], now: datetime, job_ids: list[str | None] | None = None) -> list[dict[str, Any]]:
    """The outbox rows that hold `messages` (`job_ids` marks job messages; none are by default), staged at `now`."""
    return [
        {
            "exchange": m.exchange,
            "routing_key": m.routing_key,
            "body": m.body,
            "headers": m.headers,
            "priority": m.priority,
            "message_id": m.message_id,
            "job_id": job_id,
            "created_at": now,
        }
        for m, job_id in zip(messages, job_ids or [None] * len(messages), strict=True)
    ]


def staged_event(exchange: str, event: tuple[int, str, bytes, dict[str, Any], str]) -> Pending:
    """An event a statement staged in SQL: (outbox id, routing key, body, headers, message id)."""
    outbox_id, key, body, headers, message_id = event
    return Pending(outbox_id, Outgoing(exchange, key, body, headers, message_id=message_id, mandatory=False))


def from_row(row: Any, pubsub: frozenset[str]) -> Pending:
    """An outbox row read back (by the relay) as the message it holds; `pubsub` exchanges' go without mandatory."""
    message = Outgoing(
        row.exchange,
        row.routing_key,
        row.body,
        dict(row.headers or {}),
        row.priority,
        message_id=row.message_id,
        mandatory=row.exchange not in pubsub,
    )
    return Pending(row.id, message, row.job_id)
