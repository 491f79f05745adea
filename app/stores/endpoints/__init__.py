"""The webhook endpoints' rows: registered, read (a client's own, or every client's for an admin), changed,
soft-deleted; and their health, tracked and judged in the transaction that records a batch of deliveries.

One implementation, `sql.SqlEndpoints`, serves every database (PostgreSQL, SQLite, MSSQL by rendering): these
statements are not hot (a route's, or a few per record batch whatever its size), so there is no PostgreSQL twin.
The deliveries store reads the endpoints a delivery goes to, and their secrets, in statements of its own."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from app.models.rows import EndpointRow


class EndpointStore(Protocol):
    async def add(self, endpoint: EndpointRow) -> None:
        """A new endpoint, every column given."""

    async def live(self, client_id: str | None) -> list[EndpointRow]:
        """The endpoints not deleted of `client_id` (every client's when None), oldest first."""

    async def get(self, endpoint_id: str, client_id: str | None) -> EndpointRow | None:
        """The endpoint, unless it is deleted or `client_id` may not see it (None sees every client's)."""

    async def read(self, conn: AsyncConnection, endpoint_id: str, client_id: str | None) -> EndpointRow | None:
        """`get`, in the caller's transaction."""

    async def change(self, endpoint_id: str, client_id: str | None, values: dict[str, Any]) -> EndpointRow | None:
        """Set these columns (and `updated_at`) of an endpoint `get` finds, in one transaction; the endpoint as it
        then stands, or None when there is none to change."""

    async def update_live(self, endpoint_id: str, client_id: str | None, values: dict[str, Any]) -> bool:
        """Set these columns (and `updated_at`) of an endpoint `get` would find, one statement; False if none."""

    async def clear_failing(self, conn: AsyncConnection, endpoint_ids: Sequence[str]) -> None:
        """A success ends these endpoints' failing periods."""

    async def mark_failing(self, conn: AsyncConnection, endpoint_ids: Sequence[str], now: datetime) -> None:
        """A failure starts these endpoints' failing periods at `now`, where none is running."""

    async def failing_since(
        self, conn: AsyncConnection, endpoint_ids: Sequence[str], cutoff: datetime
    ) -> list[tuple[str, datetime]]:
        """The active endpoints among these that have failed everything since `cutoff` or before, with when
        they began to."""

    async def disable(
        self, conn: AsyncConnection, reasons: Mapping[str, str], gone: Sequence[str], cutoff: datetime, now: datetime
    ) -> set[str]:
        """Disable each active endpoint of `reasons` with its reason, those not `gone` only if still failing since
        `cutoff` (one may have been re-enabled since it was judged); the ids disabled."""
