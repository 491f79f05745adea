"""The recurring schedules' store: a schedule's rows as the API reads and changes them (a client's own, or every
client's for an admin), and the firing statements of the scheduler's transaction: whether any is due, the claim
of the due ones, and their move to the next firing. One implementation, `sql.SqlSchedules`, for every database,
chosen by `app.stores.open_stores`."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from app.models.rows import ScheduleRow


@dataclass(frozen=True)
class Firing:
    """A due schedule: the firing it owes (the one it missed, if everything was down) and the next one after now."""

    schedule: ScheduleRow  # as claimed: its version is the guard of its move
    fire_at: datetime
    next_run_at: datetime | None


class ScheduleStore(Protocol):
    async def insert(self, schedule: ScheduleRow) -> None:
        """A new schedule, every column given."""

    async def get(self, schedule_id: str, client_id: str | None) -> ScheduleRow | None:
        """The schedule, unless `client_id` may not see it (None sees every client's)."""

    async def page(self, client_id: str | None, limit: int, cursor: str | None) -> tuple[list[ScheduleRow], str | None]:
        """The schedules `client_id` may see, newest first, and the cursor to the next page when more may follow."""

    async def update(
        self, schedule_id: str, client_id: str | None, values: Callable[[ScheduleRow], dict[str, Any]]
    ) -> ScheduleRow | None:
        """Set the columns `values` computes from the schedule `get` finds, read under a row lock, and bump its
        version (a firing that read it before loses its compare-and-set); the schedule as it then stands, or
        None when there is none to change."""

    async def delete(self, schedule_id: str, client_id: str | None) -> bool:
        """Remove the schedule `get` would find; False if none."""

    async def earliest_firing(self) -> datetime | None:
        """The earliest firing an active schedule owes (due or not), for the overdue gauge; None if none is active."""

    async def any_due(self, now: datetime, held: frozenset[str]) -> bool:
        """Whether an active schedule of a client not `held` is due at `now`: a read, no lock."""

    async def claim_due(
        self, conn: AsyncConnection, now: datetime, limit: int, held: frozenset[str]
    ) -> list[ScheduleRow]:
        """Up to `limit` due schedules of clients not `held`, oldest firing first, locked for the caller's
        transaction; those another transaction holds are passed over, not waited for."""

    async def fired(self, conn: AsyncConnection, keys: Sequence[str]) -> set[tuple[str, str]]:
        """The (client_id, idempotency key) of the jobs saved already under these firings' keys."""

    async def advance(self, conn: AsyncConnection, firings: Sequence[Firing], now: datetime) -> set[str]:
        """Each schedule to its next firing, its last one stamped and its version bumped, in the caller's
        transaction, if its version is still the one it was claimed at; the ids moved."""
