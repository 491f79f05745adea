"""Recurring schedules as the API serves them: create, read, list, change, delete, and trigger one run now. Their
rows are the schedules store's (app/stores/schedules/)."""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from app.core.cron import next_fire
from app.models.rows import JobRow, ScheduleRow
from app.models.types import utcnow
from app.schemas.job import Submitted
from app.services.jobs import JobService
from app.services.payload_secrets import sealed_job
from app.services.scheduling.firings import firing_request
from app.services.tenancy import Principal
from app.stores.schedules import ScheduleStore

# A change to any of these moves the next firing: it is computed again from now.
TIMING = frozenset({"cron", "timezone", "active"})


def next_run(schedule: Mapping[str, Any], now: datetime) -> datetime | None:
    """The next firing after now, or None while the schedule is paused."""
    return next_fire(schedule["cron"], schedule["timezone"], now) if schedule["active"] else None


@dataclass(frozen=True)
class ScheduleService:
    store: ScheduleStore
    jobs: JobService

    async def create(self, principal: Principal, fields: dict[str, Any]) -> ScheduleRow:
        """Save a schedule; its first firing is the first time its cron names after now."""
        now = utcnow()
        row = {**self._sealed(fields), "id": str(uuid.uuid4()), "client_id": principal.client_id, "version": 0}
        row.update(last_run_at=None, created_at=now, updated_at=now, next_run_at=next_run(row, now))
        schedule = cast(ScheduleRow, row)
        await self.store.insert(schedule)
        return schedule

    def _sealed(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Fields with the job's credentials sealed apart (`sealed`), `***` in the job (a schedule answer shows)."""
        if "job" not in fields:
            return fields
        job, sealed = sealed_job(fields["job"], self.jobs.box)
        return {**fields, "job": job, "sealed": sealed}

    async def get(self, principal: Principal, schedule_id: str) -> ScheduleRow | None:
        """The schedule, if it exists and the caller may see it."""
        return await self.store.get(schedule_id, principal.scope)

    async def page(self, principal: Principal, limit: int, cursor: str | None) -> tuple[list[ScheduleRow], str | None]:
        """Newest first; the page and the cursor to the next one when more may follow."""
        return await self.store.page(principal.scope, limit, cursor)

    async def update(self, principal: Principal, schedule_id: str, changes: dict[str, Any]) -> ScheduleRow | None:
        """Change fields; a new cron, time zone or `active` computes the next firing again from now. The store
        bumps the version, so a firing that read the old row loses its compare-and-set."""
        now, sealed = utcnow(), self._sealed(changes)

        def values(row: ScheduleRow) -> dict[str, Any]:  # of the row as locked
            if TIMING & changes.keys():
                return {**sealed, "updated_at": now, "next_run_at": next_run({**row, **changes}, now)}
            return {**sealed, "updated_at": now}

        return await self.store.update(schedule_id, principal.scope, values)

    async def delete(self, principal: Principal, schedule_id: str) -> bool:
        """Remove it: no further firing; the jobs it made stay."""
        return await self.store.delete(schedule_id, principal.scope)

    async def trigger(self, principal: Principal, schedule_id: str) -> tuple[JobRow, Submitted] | None:
        """One run now, outside the cron: a firing for this second (so a repeat within it is the same job)."""
        schedule = await self.get(principal, schedule_id)
        if schedule is None:
            return None
        request = firing_request(schedule, utcnow().replace(microsecond=0), self.jobs.box)
        owner = Principal(principal.key_id, schedule["client_id"], principal.admin)
        return await self.jobs.submit(owner, request, None)
