"""The redrive runner: in every process that runs the background workers, it leases the running redrives no live
process drives and sends their items at each one's pace, a transaction a turn (stores/redrives/advance.py)."""

import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from loguru import logger
from sqlalchemy.exc import IntegrityError

from app.core.pace import Pace
from app.services.outbox import Outbox
from app.stores.redrives import RedriveStore, Row
from app.stores.redrives.advance import Advance, Lost

TICK_SECONDS = 0.1  # a turn of the loop: the finest grain of a pace, and how soon a pause is seen mid-run
RENEW_SECONDS = 1.0  # how often the leases are renewed and new, resumed or orphaned redrives taken
LEASE_SECONDS = 10.0  # how long a killed process's redrives wait before another process takes them
MOST_PER_TURN = 200  # items in one transaction (R = 1,000 a second gives ~100 a turn)


@dataclass
class Drive:
    """One redrive this process drives: the row as its last transaction left it, and its pace."""

    row: Row
    pace: Pace


class RedriveRunner:
    def __init__(
        self, store: RedriveStore, advance: Advance, outbox: Outbox, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store, self.advance, self.outbox, self.clock = store, advance, outbox, clock
        self.owner = f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.driving: dict[str, Drive] = {}
        self.renew_at = 0.0

    async def cycle(self) -> None:
        """One turn: renew the leases when due, then send what each redrive's pace allows now."""
        if self.clock() >= self.renew_at:
            self.renew_at = self.clock() + RENEW_SECONDS
            await self._lease()
        for drive in list(self.driving.values()):
            await self._turn(drive)

    async def release(self) -> None:
        """Give this process's leases back (it is stopping): another process takes its redrives at once."""
        self.driving.clear()
        try:
            await self.store.release(self.owner)
        except Exception as exc:  # its leases then run out by themselves
            logger.warning("redrives: could not release the leases of {}: {}", self.owner, exc)

    async def _lease(self) -> None:
        rows = await self.store.lease(self.owner, LEASE_SECONDS)
        now, kept = self.clock(), self.driving
        self.driving = {}
        for row in rows:
            drive = kept.get(row["id"])
            pace = drive.pace if drive else Pace(row["per_second"], now)
            if pace.per_second != row["per_second"]:  # changed by an operator: in force from this renewal on
                pace.retime(row["per_second"])
            self.driving[row["id"]] = Drive(row, pace)

    async def _turn(self, drive: Drive) -> None:
        now = self.clock()
        most = drive.pace.due(now, MOST_PER_TURN)
        if not most:
            return
        try:
            step = await self.advance(drive.row, self.owner, most, LEASE_SECONDS)
        except (Lost, IntegrityError):
            # Paused, cancelled, taken by another process, or an item changed: read it all again now.
            self.driving.pop(drive.row["id"], None)
            self.renew_at = 0.0
            return
        drive.pace.spent(step.replayed + step.skipped, now)
        row = drive.row
        drive.row = {
            **row,
            "reached": step.reached,
            "replayed": row["replayed"] + step.replayed,
            "skipped": row["skipped"] + step.skipped,
        }
        if step.finished:
            self.driving.pop(row["id"], None)
        await self.outbox.publish(step.staged)
