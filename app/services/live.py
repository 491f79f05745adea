"""Live job events for the SSE streams: one broker queue per API process (the feed), fanned out in memory to
every open stream (the hub), each through a bounded buffer."""

import asyncio
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from loguru import logger

from app.core.broker import Broker, consume_when_up
from app.core.messages import loads
from app.core.names import Names


@dataclass(frozen=True)
class LiveEvent:
    """One job event as a stream sends it: its id, type and seq, whose job it is, and its JSON as published."""

    id: str
    type: str
    seq: int
    job_id: str
    job_type: str
    client_id: str
    data: str

    @classmethod
    def of(cls, body: bytes) -> "LiveEvent":
        """The event a job event's body holds; KeyError, TypeError or ValueError when it holds none."""
        event = loads(body)
        job = event["data"]["job"]
        return cls(
            event["id"], event["type"], event["seq"], job["id"], job["job_type"], job["client_id"], body.decode()
        )


Wanted = Callable[[LiveEvent], bool]


class Subscription:
    """One stream's events; when `size` are waiting, the next one closes it instead (its client reads too slowly,
    and would otherwise be buffered without bound)."""

    def __init__(self, wanted: Wanted, size: int) -> None:
        self.wanted = wanted
        self.size = size
        self.closed = False
        self.overflowed = False
        self._queue: asyncio.Queue[LiveEvent | None] = asyncio.Queue()

    def offer(self, event: LiveEvent) -> None:
        """Queue the event if this stream wants it; close the stream when its buffer is full."""
        if self.closed or not self.wanted(event):
            return
        if self._queue.qsize() >= self.size:
            self.overflowed = True
            self.close()
            return
        self._queue.put_nowait(event)

    def close(self) -> None:
        """End the stream: `next` answers None from now on, whatever was still waiting."""
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)

    async def next(self) -> LiveEvent | None:
        """The next event; None once closed."""
        if self.closed:
            return None
        event = await self._queue.get()
        return None if self.closed else event


class Hub:
    """Every open stream of this process; each job event is offered to each of them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._subscriptions: set[Subscription] = set()

    @contextmanager
    def subscribed(self, wanted: Wanted) -> Iterator[Subscription]:
        """A subscription for the block; events that arrive from now on wait in it."""
        subscription = Subscription(wanted, self.size)
        self._subscriptions.add(subscription)
        try:
            yield subscription
        finally:
            self._subscriptions.discard(subscription)
            subscription.close()

    def publish(self, event: LiveEvent) -> None:
        """Offer the event to every stream; forget those it closed."""
        for subscription in list(self._subscriptions):
            subscription.offer(event)
            if subscription.closed:
                self._subscriptions.discard(subscription)

    def close_all(self) -> None:
        """End every stream (their clients reconnect with Last-Event-ID and replay what they missed)."""
        for subscription in list(self._subscriptions):
            subscription.close()
        self._subscriptions.clear()

    def __len__(self) -> int:
        return len(self._subscriptions)


class EventFeed:
    """This process's one exclusive, auto-delete queue bound to every job event, feeding the hub. It lives on a
    robust channel, so aio-pika declares and binds it again after a reconnect."""

    def __init__(self, broker: Broker, names: Names, hub: Hub) -> None:
        self._broker = broker
        self._names = names
        self._hub = hub
        self._channel: AbstractChannel | None = None
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def start(self, wait: float = 0) -> None:
        """Start consuming once the broker is up; wait up to `wait` seconds for that."""
        self._task = asyncio.create_task(self._consume_when_up(), name="live-event-feed")
        if wait > 0:
            with suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.ready.wait()), wait)

    async def _consume_when_up(self) -> None:
        await consume_when_up(self._broker, self._consume, "live event feed")

    async def _consume(self) -> None:
        connection = self._broker.connection
        channel = await connection.channel()
        queue = await channel.declare_queue(
            self._names.live_queue(uuid.uuid4().hex[:12]), exclusive=True, auto_delete=True
        )
        await queue.bind(self._names.events_exchange, self._names.all_events_key)
        await queue.consume(self._on_message, no_ack=True)
        connection.reconnect_callbacks.add(self._on_reconnect)
        self._channel = channel
        self.ready.set()

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        try:
            event = LiveEvent.of(message.body)
        except (KeyError, TypeError, ValueError):
            logger.warning("live event feed: not a job event on {}, dropped", message.routing_key)
            return
        self._hub.publish(event)

    def _on_reconnect(self, _connection: Any) -> None:
        # Events published while the connection was down never reached the queue: end every stream so its
        # client reconnects with Last-Event-ID and gets them from the audit trail.
        logger.info("live event feed reconnected; closing {} streams so they replay what they missed", len(self._hub))
        self._hub.close_all()

    async def stop(self) -> None:
        """Stop consuming and end every stream."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._channel is not None and not self._channel.is_closed:
            with suppress(aio_pika.exceptions.AMQPError, OSError, RuntimeError):
                await self._channel.close()
        self._hub.close_all()
