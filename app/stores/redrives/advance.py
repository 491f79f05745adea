"""A redrive's next items sent again, and its progress moved past them, in ONE transaction: after a crash it
resumes where it stopped, and no item is sent twice by it (one replayed that dies again is behind its position)."""

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import delivery_outgoing, endpoint_key
from app.core.names import Names
from app.core.statuses import DeliveryStatus, JobStatus, RedriveKind, RedriveStatus
from app.models.tables import DELIVERIES, REDRIVE_ITEMS, REDRIVES
from app.models.types import utcnow
from app.stores.deliveries.statements import reset_for_redelivery
from app.stores.jobs import JobStore
from app.stores.outbox import OutboxStore, Pending
from app.stores.redrives import Row, event, forget_items


class Lost(Exception):
    """The redrive changed under its driver (paused, cancelled, its lease taken) or an item changed as it was
    sent: the transaction rolls back, and nothing of it happened."""


@dataclass
class Step:
    """What one transaction of a redrive did."""

    replayed: int = 0
    skipped: int = 0
    reached: int = 0  # the seq of the last item reached
    finished: bool = False
    staged: list[Pending] = field(default_factory=list)


@dataclass(frozen=True)
class Advance:
    jobs: JobStore
    outbox: OutboxStore
    names: Names

    async def __call__(self, redrive: Row, owner: str, most: int, lease_seconds: float) -> Step:
        """Send the next `most` items of `redrive` (as its driver `owner` last read it) and move its position,
        counts and lease in the same transaction; Lost when the redrive or an item changed meanwhile."""
        async with self.jobs.transaction() as conn:
            items = await _next_items(conn, redrive, most)
            ids = [item_id for _, item_id in items]
            step = await (self._jobs if redrive["kind"] == RedriveKind.JOBS else self._deliveries)(conn, redrive, ids)
            step.reached = items[-1][0] if items else redrive["reached"]
            step.finished = step.reached >= redrive["total"]
            await _progress(conn, redrive, owner, step, lease_seconds)
        return step

    async def _jobs(self, conn: AsyncConnection, redrive: Row, ids: list[str]) -> Step:
        jobs = await self.jobs.read(conn, ids)
        dead = [jobs[i] for i in ids if i in jobs and jobs[i]["status"] == JobStatus.DEAD_LETTERED]
        # The others were replayed, cancelled or deleted since the redrive took them.
        step = Step(skipped=len(ids) - len(dead))
        if dead:
            queued, step.staged = await self.jobs.replay_all(conn, dead, {"redrive": redrive["id"]})
            if len(queued) != len(dead):
                raise Lost(redrive["id"])  # some changed since read: read them again in the next transaction
            step.replayed = len(queued)
        return step

    async def _deliveries(self, conn: AsyncConnection, redrive: Row, ids: list[str]) -> Step:
        """Each failed one made pending with a fresh budget and the operator's message, as a redelivery is."""
        step = Step()
        columns = (DELIVERIES.c.id, DELIVERIES.c.status, DELIVERIES.c.request_id, DELIVERIES.c.endpoint_id)
        query = select(*columns, DELIVERIES.c.url).where(DELIVERIES.c.id.in_(ids))
        found = {row.id: row for row in await conn.execute(query)}
        for delivery_id in ids:
            row = found.get(delivery_id)
            if row is None or row.status != DeliveryStatus.FAILED:
                step.skipped += 1
                continue
            reset = reset_for_redelivery(delivery_id).where(DELIVERIES.c.status == DeliveryStatus.FAILED)
            if (await conn.execute(reset)).rowcount != 1:
                raise Lost(delivery_id)
            endpoint = endpoint_key(row.endpoint_id, row.url)
            message = delivery_outgoing(self.names, row.id, row.request_id, endpoint, operator=True)
            step.replayed += 1
            step.staged += await self.outbox.stage(conn, [message])
        return step


async def _next_items(conn: AsyncConnection, redrive: Row, most: int) -> list[tuple[int, str]]:
    """The next `most` items. Their numbers run 1..total without a gap, so the range says which rows: the scan
    reads no row past them whatever the planner guesses of a table it may not have analysed yet."""
    seq, reached = REDRIVE_ITEMS.c.seq, redrive["reached"]
    after = (REDRIVE_ITEMS.c.redrive_id == redrive["id"], seq > reached, seq <= reached + most)
    query = select(seq, REDRIVE_ITEMS.c.item_id).where(*after).order_by(seq)
    return [(number, item_id) for number, item_id in await conn.execute(query)]


async def _progress(conn: AsyncConnection, redrive: Row, owner: str, step: Step, lease_seconds: float) -> None:
    """The position, counts and lease moved, guarded by the position and lease its driver read: a pause, a
    cancel or another driver in between makes it Lost."""
    now = utcnow()
    values: dict[str, Any] = {
        "reached": step.reached,
        "replayed": REDRIVES.c.replayed + step.replayed,
        "skipped": REDRIVES.c.skipped + step.skipped,
        "updated_at": now,
        "lease_until": now + timedelta(seconds=lease_seconds),
    }
    if step.finished:
        values.update(status=RedriveStatus.FINISHED, finished_at=now, lease_owner=None, lease_until=None)
    guard = (
        REDRIVES.c.id == redrive["id"],
        REDRIVES.c.status == RedriveStatus.RUNNING,
        REDRIVES.c.lease_owner == owner,
        REDRIVES.c.reached == redrive["reached"],
    )
    if (await conn.execute(update(REDRIVES).where(*guard).values(**values))).rowcount != 1:
        raise Lost(redrive["id"])
    if step.finished:
        await event(conn, redrive["id"], "finished", None, now)
        await forget_items(conn, redrive["id"])
