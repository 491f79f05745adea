"""Every process's heartbeat: its workers' reports, with rates over the last minute, written to Redis."""

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from loguru import logger
from redis.exceptions import RedisError

from app.core.recent_logs import process_name
from app.core.tasks import cancelled
from app.services.worker_directory import WorkerDirectory
from app.workers.reports import WorkerReport

WINDOW_SECONDS = 60.0
BEAT_TIMEOUT = 5.0  # beyond its interval, the longest a stop waits for a beat under way
Reports = Callable[[], list[WorkerReport]]


class Rates:
    """A small ring of (time, processed, failed) samples per worker, enough to span the last minute."""

    def __init__(self, interval: float) -> None:
        self._size = min(math.ceil(WINDOW_SECONDS / interval) + 1, 600)
        self._samples: dict[str, deque[tuple[float, int, int]]] = {}

    def add(self, report: WorkerReport, now: float) -> tuple[float, float]:
        """Record `report` and return its processing rate (per second) and error rate (failed over processed)."""
        ring = self._samples.setdefault(report.name, deque(maxlen=self._size))
        ring.append((now, report.processed, report.failed))
        while now - ring[0][0] > WINDOW_SECONDS:
            ring.popleft()
        then, processed, failed = ring[0]
        done = report.processed - processed
        rate = done / (now - then) if now > then else 0.0
        return round(rate, 3), round((report.failed - failed) / done, 4) if done > 0 else 0.0


class Heartbeat:
    """A part of every process: every `interval` seconds it writes what `reports` returns, until stopped."""

    name = "worker_heartbeat"

    def __init__(
        self,
        directory: WorkerDirectory,
        reports: Callable[[], list[WorkerReport]],
        on_beat: Callable[[], Awaitable[None]],
    ) -> None:
        self.directory, self.reports, self.on_beat = directory, reports, on_beat
        self.process = process_name()
        self.rates = Rates(directory.heartbeat_seconds)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def documents(self, now: float) -> list[dict[str, Any]]:
        """The workers as GET /api/v1/workers lists them."""
        beat = datetime.now(UTC).isoformat()
        documents = []
        for report in self.reports():
            processing, errors = self.rates.add(report, now)
            extra = {"processing_rate": processing, "error_rate": errors, "last_heartbeat": beat}
            documents.append({**report.as_dict(), **extra})
        return documents

    async def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def _run(self) -> None:
        while not self._stopping:  # a stop also cancels it, but a cancel can be lost (core/tasks.py)
            try:
                await self.directory.beat(self.process, self.documents(time.monotonic()))
                await self.on_beat()
            except (RedisError, OSError) as exc:  # the next beat tries again; the process keeps working
                logger.warning("worker heartbeat not written: {}", exc)
            await asyncio.sleep(self.directory.heartbeat_seconds)

    async def stop(self, grace: float) -> None:
        self._stopping = True
        if self._task is not None:
            if not await cancelled(self._task, self.directory.heartbeat_seconds + BEAT_TIMEOUT):
                logger.warning("the worker heartbeat did not end when cancelled")
            self._task = None
        with contextlib.suppress(RedisError, OSError):
            await self.directory.leave(self.process)
