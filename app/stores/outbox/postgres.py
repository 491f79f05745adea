"""The outbox's rows on PostgreSQL: inserts and deletes as one array statement whatever their number."""

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.stores import postgres
from app.stores.outbox.portable import PortableOutbox

# Ordered by position, so the serial ids grow in the order of the rows given: sorted, they match them.
INSERT_OUTBOX = (
    "INSERT INTO outbox (exchange, routing_key, body, headers, priority, message_id, job_id, created_at) "
    "SELECT exchange, routing_key, body, headers, priority, message_id, job_id, created_at FROM unnest("
    "$1::varchar[], $2::varchar[], $3::bytea[], $4::json[], $5::int[], $6::varchar[], $7::varchar[], "
    "$8::timestamptz[]) WITH ORDINALITY "
    "AS t(exchange, routing_key, body, headers, priority, message_id, job_id, created_at, n) ORDER BY n "
    "RETURNING id"
)
DROP_OUTBOX = "DELETE FROM outbox WHERE id = ANY($1::bigint[])"


def outbox_columns(rows: Sequence[dict[str, Any]]) -> tuple[list[Any], ...]:
    """Outbox rows as INSERT_OUTBOX's eight arrays."""
    return (
        [r["exchange"] for r in rows],
        [r["routing_key"] for r in rows],
        [r["body"] for r in rows],
        [postgres.to_json(r["headers"]) for r in rows],
        [r["priority"] for r in rows],
        [r["message_id"] for r in rows],
        [r["job_id"] for r in rows],
        [r["created_at"] for r in rows],
    )


class PgOutbox(PortableOutbox):
    async def _insert(self, conn: AsyncConnection, rows: list[dict[str, Any]]) -> Iterable[int]:
        return postgres.ids_in_order(await postgres.rows(conn, INSERT_OUTBOX, outbox_columns(rows)))

    async def drop(self, conn: AsyncConnection, ids: list[int]) -> None:
        """Delete by id: one array parameter, where an IN list is compiled anew for each length."""
        await postgres.rows(conn, DROP_OUTBOX, (ids,))
