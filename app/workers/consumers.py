"""A group of prefetch-1 consumers, each on its own channel (rule 7), with in-flight tracking and a graceful stop."""

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractQueue
from loguru import logger

from app.core.broker import Broker, PublishError, consuming
from app.core.incoming import Handler, Message, MessageHandler
from app.core.resources import Resources
from app.core.statuses import WorkerKind, WorkerState
from app.core.tasks import cancelled
from app.core.topology import QueueSpec
from app.workers import unprocessable
from app.workers.reports import WorkerReport

REQUEUE_PAUSE = 1.0
WATCH_INTERVAL = 5.0  # seconds between two looks at whether every consumer still consumes
CHANNEL_TIMEOUT = 5.0  # the longest a stop waits for a consumer's cancel, or the watch for its channel's close
REPLACE_TIMEOUT = 30.0  # the longest the watch waits for a new consumer before it tries again at the next look

GiveUp = Callable[[Message, Exception], Awaitable[None]]
"""What a worker does with a message it failed to process `unprocessable.TRIES` times: settles it, for good."""


async def into_dead_letters(message: Message, exc: Exception) -> None:
    """Give a message up with nothing else to record: reject it into its queue's DLQ."""
    await message.reject(requeue=False)


@dataclass
class Consumer:
    spec: QueueSpec
    channel: AbstractChannel
    queue: AbstractQueue
    tag: str = ""
    handling: int = 0  # its message being handled (prefetch 1: 0 or 1)

    @property
    def queue_name(self) -> str:
        return self.spec.name


@dataclass
class ConsumerGroup:
    """Consumers for some queues of the topology, on a connection of their own (publishing uses another)."""

    resources: Resources
    name: str
    plan: dict[str, int]  # queue name -> how many consumers
    handle: MessageHandler
    give_up: GiveUp = into_dead_letters
    consumers: list[Consumer] = field(default_factory=list)
    inflight: set["asyncio.Task[Any]"] = field(default_factory=set)
    busy: Counter[str] = field(default_factory=Counter)  # queue name -> messages being handled (unacked)
    state: WorkerState = WorkerState.STOPPED
    handled: int = 0  # messages taken, whatever became of them
    failed: int = 0  # messages whose handler raised

    def __post_init__(self) -> None:
        settings = self.resources.settings
        topology, timeout = self.resources.topology, settings.publish_timeout_seconds
        self.intake = Broker(settings.rabbitmq_url, topology, timeout, name=f"{self.name}-consumer")
        self._starter: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        """Connect (retrying until the broker is up) and start consuming, in the background."""
        self._stopping = False
        await self.intake.start()
        self._starter = asyncio.create_task(self._start_consumers(), name=f"{self.name}-start")

    async def _start_consumers(self) -> None:
        await self.intake.ready.wait()
        specs = {spec.name: spec for spec in self.resources.topology.queues}
        wanted = [specs[queue_name] for queue_name, count in self.plan.items() for _ in range(count)]
        # All at once: one after another, a worker starting on a backlog ran with a few consumers for as long as
        # the rest took to attach (four round trips each, slowed by the messages the first ones were handling).
        started = await asyncio.gather(*(self.attach(spec) for spec in wanted), return_exceptions=True)
        self.consumers.extend(c for c in started if isinstance(c, Consumer))
        failed = [exc for exc in started if isinstance(exc, BaseException)]
        if failed:
            raise failed[0]
        self.state = WorkerState.RUNNING
        logger.info("{} consuming: {}", self.name, self.plan)
        await self._watch()

    async def attach(self, spec: QueueSpec) -> Consumer:
        """One prefetch-1 consumer on its own channel, attached to `spec`'s queue."""
        channel = await self.intake.connection.channel()
        await channel.set_qos(prefetch_count=1)
        # Declared through this channel so the robust channel restores queue and consumer after a reconnect.
        queue = await channel.declare_queue(spec.name, durable=True, arguments=spec.arguments)
        consumer = Consumer(spec, channel, queue)
        consumer.tag = await queue.consume(Handler(partial(self._on_message, consumer)))
        return consumer

    async def _watch(self) -> None:
        """aio-pika restores each channel's consumer after a reconnect; when that restore itself fails (seen when
        a cluster node went away while it ran) the consumer is gone for good and the worker goes on with fewer. So
        a consumer found not consuming at two looks in a row, while the connection is up and restored and it
        handles no message, is replaced: its channel closed, a new one opened with a new consumer."""
        suspects: set[str] = set()  # tags
        while not self._stopping:  # a stop also cancels it, but a cancel can be lost (core/tasks.py)
            await asyncio.sleep(WATCH_INTERVAL)
            if not self.intake.settled:
                suspects.clear()  # reconnecting or restoring: aio-pika is at work, give it its chance
                continue
            lost = {c.tag for c in self.consumers if c.handling == 0 and not await consuming(c.channel, c.tag)}
            replaced: set[str] = set()
            for index, consumer in enumerate(list(self.consumers)):
                if consumer.tag in lost & suspects:
                    try:
                        self.consumers[index] = await self._replace(consumer)
                    except (aio_pika.exceptions.AMQPError, OSError, RuntimeError, TimeoutError) as exc:
                        logger.warning("{}: could not start a new consumer ({}); trying again", self.name, exc)
                    else:
                        replaced.add(consumer.tag)
            suspects = lost - replaced  # one whose replacement failed is tried again at the next look

    async def _replace(self, consumer: Consumer) -> Consumer:
        logger.warning("{}: a consumer of {} stopped consuming; starting a new one", self.name, consumer.queue_name)
        with contextlib.suppress(Exception):  # closed: aio-pika no longer restores it
            await asyncio.wait_for(consumer.channel.close(), timeout=CHANNEL_TIMEOUT)
        return await asyncio.wait_for(self.attach(consumer.spec), timeout=REPLACE_TIMEOUT)

    async def _on_message(self, consumer: Consumer, message: Message) -> None:
        task = asyncio.current_task()
        assert task is not None
        queue_name = consumer.queue_name
        self.inflight.add(task)
        self.busy[queue_name] += 1
        consumer.handling += 1
        try:
            await self.handle(message)
        except asyncio.CancelledError:
            raise  # not acked: the broker redelivers it
        except Exception as exc:
            self.failed += 1
            await self._failed(consumer, message, exc)
        finally:
            self.inflight.discard(task)
            self.busy[queue_name] -= 1
            consumer.handling -= 1
            self.handled += 1

    async def _failed(self, consumer: Consumer, message: Message, exc: Exception) -> None:
        """A message whose handling raised: back for redelivery after a pause (no hot loop) when a resource is
        away; counted when the failure is the service's own, and given up at the last try (unprocessable.py)."""
        if unprocessable.is_outage(exc):
            logger.opt(exception=exc).error("{} could not handle a message; returning it for redelivery", self.name)
            await self._requeue(message)
            return
        failed = unprocessable.failures(message) + 1
        if failed >= unprocessable.TRIES:
            logger.opt(exception=exc).error(
                "{} failed to process message {} {} times; giving it up as unprocessable",
                self.name,
                message.message_id,
                failed,
            )
            try:
                await self.give_up(message, exc)
            except Exception:
                logger.exception("{} could not give message {} up; returning it", self.name, message.message_id)
                await self._requeue(message)
            return
        logger.opt(exception=exc).error(
            "{} failed to process message {} (failure {} of {}); trying it again",
            self.name,
            message.message_id,
            failed,
            unprocessable.TRIES,
        )
        await asyncio.sleep(REQUEUE_PAUSE)
        try:  # a copy that counts, then the original settled; a copy that did not go out: the original comes back
            await self.resources.broker.publish(unprocessable.again(message, consumer.queue_name, failed))
        except PublishError:
            await self._requeue(message, pause=False)
            return
        with contextlib.suppress(Exception):
            await message.ack()

    async def _requeue(self, message: Message, pause: bool = True) -> None:
        # Unacked under prefetch 1 would stall this consumer: pause (no hot loop), then requeue it.
        if pause:
            await asyncio.sleep(REQUEUE_PAUSE)
        with contextlib.suppress(Exception):
            await message.nack(requeue=True)

    async def stop(self, grace: float) -> None:
        """Stop taking messages, let in-flight ones finish within `grace` seconds, then close (rule 9)."""
        self._stopping = True
        if self._starter is not None and not await cancelled(self._starter, WATCH_INTERVAL + CHANNEL_TIMEOUT):
            logger.warning("{}: its consumers' watch did not end when cancelled", self.name)
        for consumer in self.consumers:
            with contextlib.suppress(Exception):  # bounded: a robust channel waits for a connection that is down
                await asyncio.wait_for(consumer.queue.cancel(consumer.tag), timeout=CHANNEL_TIMEOUT)
        if self.inflight:
            logger.info("{} waiting up to {}s for {} in-flight message(s)", self.name, grace, len(self.inflight))
            _, pending = await asyncio.wait(set(self.inflight), timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                _, stuck = await asyncio.wait(pending, timeout=CHANNEL_TIMEOUT)
                if stuck:
                    logger.warning("{}: {} message handler(s) did not end when cancelled", self.name, len(stuck))
        try:  # bounded too: a stop that hangs on the broker would keep the process, and its consumers, alive
            await asyncio.wait_for(self.intake.close(), timeout=CHANNEL_TIMEOUT)
        except TimeoutError:
            logger.warning("{}: the consumers' connection did not close within {}s", self.name, CHANNEL_TIMEOUT)
        self.consumers.clear()
        self.state = WorkerState.STOPPED


def consumer_report(name: str, kind: WorkerKind, state: WorkerState, groups: Iterable[ConsumerGroup]) -> WorkerReport:
    """A consumer worker's report, its groups summed. Such a worker never backs off as a whole (its job types'
    and endpoints' circuits are their own), so its breaker reads closed."""
    groups = list(groups)
    return WorkerReport(
        name,
        kind,
        state,
        consumers=sum(len(group.consumers) for group in groups),
        in_flight=sum(len(group.inflight) for group in groups),
        processed=sum(group.handled for group in groups),
        failed=sum(group.failed for group in groups),
    )


def unacked(groups: Iterable[ConsumerGroup]) -> dict[str, int]:
    """Messages these groups hold unacked, by queue (prefetch 1: the ones being handled)."""
    total: Counter[str] = Counter()
    for group in groups:
        total.update(group.busy)
    return dict(total)
