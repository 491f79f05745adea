"""Throttled redrives as the API offers them: start one, list them, read one, pause, resume or cancel it, change
its pace. The runner that sends their items is services/upkeep/redrives.py.

Whose items: a client's redrive takes only its own; an admin's takes every client's matching items (its
`client_id` is null, and only admins see it)."""

from dataclasses import dataclass
from typing import Any

from app.core.statuses import REDRIVE_ACTIONS
from app.schemas.redrive import RedriveIn
from app.services.tenancy import Principal
from app.stores.redrives import Moved, NewRedrive, RedriveStore, Row


class NotAllowed(Exception):
    """The redrive's status does not allow the action (resuming a finished one)."""

    def __init__(self, action: str, status: str) -> None:
        super().__init__(f"{action} from {status}")
        self.action, self.status = action, status


@dataclass(frozen=True)
class RedriveService:
    store: RedriveStore

    async def start(self, principal: Principal, asked: RedriveIn) -> Row:
        """A new running redrive of the caller's matching items (every client's for an admin)."""
        new = NewRedrive(
            client_id=principal.scope,
            created_by=principal.client_id,
            kind=asked.kind,
            selection=asked.selection(),
            max_items=asked.limit,
            per_second=asked.per_second,
        )
        return await self.store.create(new)

    async def page(
        self, principal: Principal, status: str | None, limit: int, cursor: str | None
    ) -> tuple[list[Row], str | None]:
        """The caller's redrives (an admin: all), newest first."""
        return await self.store.page(principal.scope, status, limit, cursor)

    async def one(self, principal: Principal, redrive_id: str) -> Row | None:
        """The caller's redrive, None when it has none by that id."""
        return await self.store.one(redrive_id, principal.scope)

    async def act(self, principal: Principal, redrive_id: str, action: str) -> Row | None:
        """Pause, resume or cancel the caller's redrive: the redrive after it; None when it has none by that id,
        NotAllowed when its status does not allow the action."""
        if await self.store.one(redrive_id, principal.scope) is None:
            return None
        target, sources = REDRIVE_ACTIONS[action]
        try:
            await self.store.move(redrive_id, target, sources, principal.client_id)
        except Moved as moved:
            raise NotAllowed(action, moved.status) from None
        return await self.store.one(redrive_id, principal.scope)

    async def retime(self, principal: Principal, redrive_id: str, per_second: float) -> Row | None:
        """A new pace for the caller's running or paused redrive: the redrive after it; None when it has none by
        that id, NotAllowed when it has ended."""
        if await self.store.one(redrive_id, principal.scope) is None:
            return None
        try:
            await self.store.retime(redrive_id, per_second, principal.client_id)
        except Moved as moved:
            raise NotAllowed("retime", moved.status) from None
        return await self.store.one(redrive_id, principal.scope)


def answer(row: Row) -> dict[str, Any]:
    """A redrive row in the API's shape."""
    return {**row, "limit": row["max_items"]}
