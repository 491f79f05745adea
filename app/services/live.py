"""Live job events for the SSE streams: one broker queue per API process (the feed), bound while streams are
open and fanned out in memory to every open stream (the hub), each through a bounded buffer."""

import asyncio
import math
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from loguru import logger

from app.core.broker import Broker, consume_when_up, consuming
from app.core.messages import JobEvent, events_of
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
        """The event a job event's body holds; KeyError or ValueError when it holds none."""
        event = JobEvent.from_bytes(body)
        job = event.job
        # A workflow's event has no job: it is kept apart by its workflow (its seq counts the workflow's changes).
        subject = job["id"] if job["id"] is not None else f"workflow:{job['workflow_id']}"
        return cls(event.id, event.type, event.seq, subject, job["job_type"] or "", job["client_id"], body.decode())


Wanted = Callable[[LiveEvent], bool]
LINGER_SECONDS = 30.0  # the feed's queue stays bound this long after the last stream closed


class Subscription:
    """One stream's events; when `size` are waiting, the next one closes it instead (its client reads too slowly,
    and would otherwise be buffered without bound)."""

    def __init__(self, wanted: Wanted, size: int, key_id: str | None = None) -> None:
        self.wanted = wanted
        self.size = size
        self.key_id = key_id  # the API key it was opened with (None: the configured admin key)
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
        self.changed_at = -math.inf  # when a stream last opened or closed (monotonic)

    @contextmanager
    def subscribed(self, wanted: Wanted, key_id: str | None = None) -> Iterator[Subscription]:
        """A subscription for the block, opened with API key `key_id`; events that arrive from now on wait in it."""
        subscription = Subscription(wanted, self.size, key_id)
        self._subscriptions.add(subscription)
        self.changed_at = time.monotonic()
        try:
            yield subscription
        finally:
            self._subscriptions.discard(subscription)
            self.changed_at = time.monotonic()
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

    def key_ids(self) -> set[str]:
        """The API keys the open streams were opened with."""
        return {s.key_id for s in self._subscriptions if s.key_id is not None}

    def close_keys(self, key_ids: set[str]) -> int:
        """End every stream opened with one of `key_ids` (revoked keys); how many ended."""
        ending = [s for s in self._subscriptions if s.key_id in key_ids]
        for subscription in ending:
            subscription.close()
            self._subscriptions.discard(subscription)
        return len(ending)

    def __len__(self) -> int:
        return len(self._subscriptions)


class EventFeed:
    """This process's one exclusive, auto-delete queue bound to every job event, feeding the hub, while streams
    are open. With none open for `linger` seconds the queue goes, so a process no one watches receives no job
    event at all; the next stream binds it again before it answers (`wanted`). It lives on a robust channel, so
    aio-pika declares and binds it again after a reconnect."""

    def __init__(self, broker: Broker, names: Names, hub: Hub, linger: float = LINGER_SECONDS) -> None:
        self._broker = broker
        self._names = names
        self.hub = hub
        self.linger = linger
        self._channel: AbstractChannel | None = None
        self.queue_name: str | None = None  # while bound
        self._task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._hooked: Any = None  # the connection whose reconnects end the streams
        self._wanted_at = -math.inf
        self._tag = ""  # the consumer's, while bound
        self.ready = asyncio.Event()  # the queue is bound and consumed

    @property
    def binding(self) -> tuple[AbstractChannel, str] | None:
        """The channel and consumer tag of the feed's queue while it is bound."""
        return (self._channel, self._tag) if self._channel is not None else None

    async def start(self) -> None:
        """Watch for idleness; the queue is bound when the first stream asks for it."""
        self._watch = asyncio.create_task(self._unbind_when_idle(), name="live-event-feed-idle")

    async def wanted(self, within: float) -> bool:
        """A stream opens: bind the queue if it is not, and wait up to `within` seconds for it. False when the
        broker is not reachable within that time (the stream then gets no live event until it is)."""
        self._wanted_at = time.monotonic()
        await self._unbind_if_lost()
        if not self.ready.is_set() and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._consume_when_up(), name="live-event-feed")
        with suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.ready.wait()), within)
        return self.ready.is_set()

    async def _consume_when_up(self) -> None:
        await consume_when_up(self._broker, self._consume, "live event feed")

    async def _consume(self) -> None:
        connection = self._broker.connection
        channel = await connection.channel()
        name = self._names.live_queue(uuid.uuid4().hex[:12])
        queue = await channel.declare_queue(name, exclusive=True, auto_delete=True)
        await queue.bind(self._names.events_exchange, self._names.all_events_key)
        await queue.bind(self._names.events_exchange, self._names.workflow_events_key)
        self._tag = await queue.consume(self._on_message, no_ack=True)
        if self._hooked is not connection:
            connection.reconnect_callbacks.add(self._on_reconnect)
            self._hooked = connection
        self._channel, self.queue_name = channel, name
        self.ready.set()

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        try:
            events = [LiveEvent.of(body) for body in events_of(message.body)]  # one, or a bundle's
        except (KeyError, TypeError, ValueError):
            logger.warning("live event feed: not a job event on {}, dropped", message.routing_key)
            return
        for event in events:
            self.hub.publish(event)

    def _on_reconnect(self, _connection: Any) -> None:
        # Events published while the connection was down never reached the queue: end every stream so its
        # client reconnects with Last-Event-ID and gets them from the audit trail.
        logger.info("live event feed reconnected; closing {} streams so they replay what they missed", len(self.hub))
        self.hub.close_all()

    def idle(self) -> bool:
        """No stream open, and none opened or closed for `linger` seconds."""
        quiet_since = max(self._wanted_at, self.hub.changed_at)
        return not len(self.hub) and time.monotonic() - quiet_since >= self.linger

    async def _unbind_when_idle(self) -> None:
        while True:
            await asyncio.sleep(self.linger / 4)
            if self.ready.is_set() and self.idle():
                logger.debug("live event feed: no stream for {} s; unbinding its queue", self.linger)
                await self._unbind()
            elif await self._unbind_if_lost():
                # The streams missed what came while it was gone: they end, and their clients come back with
                # Last-Event-ID, get it from the audit trail, and bind a new queue.
                self.hub.close_all()

    async def _unbind_if_lost(self) -> bool:
        """Unbind a queue whose consumer is gone (its channel's restore failed after a reconnect), so the next
        stream binds a new one. Not while the connection is down or being restored: aio-pika is at work then."""
        channel = self._channel
        if not self.ready.is_set() or channel is None or not self._broker.settled:
            return False
        if await consuming(channel, self._tag):
            return False
        logger.warning("live event feed: its consumer is gone; binding a new queue for the next stream")
        await self._unbind()
        return True

    async def _unbind(self) -> None:
        self.ready.clear()
        channel, self._channel, self.queue_name = self._channel, None, None
        if channel is not None and not channel.is_closed:
            with suppress(aio_pika.exceptions.AMQPError, OSError, RuntimeError):
                await channel.close()  # the exclusive, auto-delete queue goes with its consumer

    async def stop(self) -> None:
        """Stop consuming and end every stream."""
        for task in (self._watch, self._task):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self._unbind()
        self.hub.close_all()
