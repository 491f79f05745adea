"""Stop and start workers from outside: one exclusive, auto-delete queue per process on the control fanout, and the
operator's choice read back from Redis when the process starts and on every heartbeat (a lost message heals). The
same fanout carries the runs to stop of jobs cancelled as they ran (services/run_stops.py)."""

import asyncio
import uuid
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from loguru import logger
from redis.exceptions import RedisError

from app.core.broker import Broker, consume_when_up
from app.core.names import Names
from app.core.statuses import Action
from app.services.worker_directory import Command, StopRuns, WorkerDirectory, decode

READ_TIMEOUT = 2.0


class Steerable(Protocol):
    """What the control needs of the runtime: its worker names, and a stop or start of one by name."""

    held: set[str]

    def worker_names(self) -> Iterable[str]: ...

    async def halt(self, name: str) -> None: ...

    async def resume(self, name: str) -> None: ...

    def stop_runs(self, job_ids: Iterable[str]) -> None: ...


class Control:
    """A part added before the workers: its start reads which workers an operator stopped, so they stay down."""

    name = "worker_control"

    def __init__(self, broker: Broker, names: Names, directory: WorkerDirectory, runtime: Steerable) -> None:
        self.broker, self.names, self.directory, self.runtime = broker, names, directory, runtime
        self._lock = asyncio.Lock()
        self._channel: AbstractChannel | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._consumer: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def start(self) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                self.runtime.held.update(await self.directory.stopped())
        except (TimeoutError, RedisError, OSError) as exc:  # fail open: better running than stuck
            logger.warning("could not read which workers are stopped ({}); starting them all", exc)
        if self.runtime.held:
            logger.info("workers stopped by an operator, not started: {}", sorted(self.runtime.held))
        self._consumer = asyncio.create_task(self._consume_when_up(), name="worker-control")

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _consume_when_up(self) -> None:
        await consume_when_up(self.broker, self._consume, "worker control")

    async def _consume(self) -> None:
        channel = await self.broker.connection.channel()
        queue = await channel.declare_queue(
            self.names.control_queue(uuid.uuid4().hex[:12]), exclusive=True, auto_delete=True
        )
        await queue.bind(self.names.control_exchange)
        await queue.consume(self._on_message, no_ack=True)
        self._channel = channel
        self.ready.set()

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        try:
            command = decode(message.body)
        except (KeyError, TypeError, ValueError):
            logger.warning("worker control: not a command, dropped: {!r}", message.body[:200])
            return
        if isinstance(command, StopRuns):  # at once: a cancel's handler stops within a second
            self.runtime.stop_runs(command.jobs)
            return
        # A stop waits for in-flight jobs: off the consumer, so the next command is not held up behind it.
        self._spawn(self.apply(command))

    async def apply(self, command: Command) -> None:
        """Do `command` to this process's worker of that name, if it runs one."""
        if command.name not in set(self.runtime.worker_names()):
            return
        async with self._lock:
            if command.action is Action.STOP:
                await self.runtime.halt(command.name)
            else:
                await self.runtime.resume(command.name)

    async def reconcile(self) -> None:
        """Bring the workers to what Redis holds, for a command this process did not hear."""
        stopped = await self.directory.stopped()
        for name in self.runtime.worker_names():
            if (name in stopped) != (name in self.runtime.held):
                await self.apply(Command(name, Action.STOP if name in stopped else Action.START))

    async def stop(self, grace: float) -> None:
        """No further commands; one under way (a stop waiting for its jobs) gets `grace` seconds."""
        if self._consumer is not None:
            self._consumer.cancel()
            await asyncio.gather(self._consumer, return_exceptions=True)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        if self._channel is not None and not self._channel.is_closed:
            try:
                await self._channel.close()
            except (aio_pika.exceptions.AMQPError, OSError, RuntimeError) as exc:
                logger.info("worker control channel did not close cleanly: {}", exc)
