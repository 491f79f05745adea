"""The latest log records of every process, newest first, in capped Redis lists per namespace: one for warnings
and errors, one for what lies below them (INFO, DEBUG), kept only where the process's LOG_LEVEL lets it through."""

import asyncio
import contextlib
import itertools
import json
import os
import socket
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from loguru import logger
from redis.asyncio import Redis
from redis.exceptions import RedisError

if TYPE_CHECKING:
    from loguru import Message, Record

KEPT = 1_000  # records in the list, across all processes
QUEUED = 10_000  # records waiting in one process while Redis is slow or away; more are dropped
BATCH = 500
RETRY_SECONDS = 1.0
STOP_SECONDS = 2.0
SHIPPED_LEVEL = "WARNING"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


LEVEL_NUMBERS = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "SUCCESS": 25, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


def process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _not_our_own(record: "Record") -> bool:
    # The shipper's own complaints about Redis would otherwise queue more records for the Redis that is away.
    return not record["extra"].get("recent_logs")


class RecentLogs:
    """A loguru sink that never waits: a record goes into a bounded in-memory queue (or is dropped and counted
    when it is full), and a background task pushes the queue to Redis with LPUSH and LTRIM."""

    def __init__(
        self, redis: Redis, keys: tuple[str, str], redact: Callable[[str], str], level: str = SHIPPED_LEVEL
    ) -> None:
        self.redis, self.redact = redis, redact
        self.key, self.info_key = keys  # warnings and above; the rest
        self.level = level if LEVEL_NUMBERS.get(level, 0) < LEVEL_NUMBERS[SHIPPED_LEVEL] else SHIPPED_LEVEL
        self.process = process_name()
        self.dropped = 0
        self._queue: deque[Record] = deque()
        self._wake = asyncio.Event()
        self._closing = False
        self._failing = False
        self._handler: int | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Add the sink and start draining; call inside the process's event loop."""
        self._loop, self._thread = asyncio.get_running_loop(), threading.get_ident()
        self._task = asyncio.create_task(self._drain(), name="recent-logs")
        self._handler = logger.add(self._sink, level=self.level, filter=_not_our_own, format="{message}")

    async def stop(self) -> None:
        """Remove the sink and push what is queued, for at most STOP_SECONDS."""
        if self._handler is not None:
            with contextlib.suppress(ValueError):  # configure_logging may have removed every sink already
                logger.remove(self._handler)
        self._closing = True
        self._wake.set()
        if self._task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._task, STOP_SECONDS)

    def _sink(self, message: "Message") -> None:
        if len(self._queue) >= QUEUED:
            self.dropped += 1
            return
        self._queue.append(message.record)
        if threading.get_ident() == self._thread:
            self._wake.set()
        else:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self._loop.call_soon_threadsafe(self._wake.set)

    async def _drain(self) -> None:
        while not (self._closing and not self._queue):
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch = [self._queue.popleft() for _ in range(min(BATCH, len(self._queue)))]
                await self._push(self._by_key(batch))

    def _by_key(self, batch: "list[Record]") -> dict[str, list[str]]:
        lines: dict[str, list[str]] = {}
        for record in batch:
            key = self.key if record["level"].no >= LEVEL_NUMBERS[SHIPPED_LEVEL] else self.info_key
            lines.setdefault(key, []).append(self._encode(record))
        return lines

    async def _push(self, by_key: dict[str, list[str]]) -> None:
        lines = [line for batch in by_key.values() for line in batch]
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for key, batch in by_key.items():
                    pipe.lpush(key, *batch)  # the last of the batch, the newest, ends up first
                    pipe.ltrim(key, 0, KEPT - 1)
                await pipe.execute()
        except (RedisError, OSError) as exc:
            self.dropped += len(lines)
            if not self._failing:
                logger.bind(recent_logs=True).warning("Redis unavailable, recent log records are dropped: {}", exc)
            self._failing = True
            if not self._closing:
                await asyncio.sleep(RETRY_SECONDS)
            return
        if self._failing:
            logger.bind(recent_logs=True).info("Redis is back; recent log records are kept again")
        self._failing = False

    def _encode(self, record: "Record") -> str:
        message = record["message"]
        if record["exception"] is not None and record["exception"].type is not None:
            message += f"\n{record['exception'].type.__name__}: {record['exception'].value}"
        request_id = record["extra"].get("request_id")
        entry = {
            "time": record["time"].astimezone(UTC).isoformat(),
            "level": record["level"].name,
            "process": self.process,
            "logger": record["name"],
            "message": self.redact(message),
            "request_id": None if request_id in (None, "-") else request_id,
        }
        return json.dumps(entry)


async def recent(redis: Redis, keys: tuple[str, str], level: LogLevel, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` records at `level` or above, newest first (`keys`: the warnings' list, the rest's)."""
    floor = LEVEL_NUMBERS[level]
    wanted_keys = keys if floor < LEVEL_NUMBERS[SHIPPED_LEVEL] else keys[:1]
    lists = [[json.loads(line) for line in await redis.lrange(key, 0, KEPT - 1)] for key in wanted_keys]
    # Each list is newest first already; two are merged by time (a stable sort: ties keep their lists' order).
    records = lists[0] if len(lists) == 1 else sorted(lists[0] + lists[1], key=_time, reverse=True)
    wanted = (record for record in records if LEVEL_NUMBERS.get(record["level"], 0) >= floor)
    return list(itertools.islice(wanted, limit))


def _time(record: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(record["time"])
