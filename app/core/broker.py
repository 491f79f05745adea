"""Connections to RabbitMQ and the confirmed, mandatory, time-limited publish (rule 1)."""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractRobustConnection
from loguru import logger

from app.core.failover import FailoverConnection, node_urls
from app.core.publish_batch import Frames, publish_together
from app.core.topology import Topology, TopologyMismatch, declare

PERSISTENT = int(aio_pika.DeliveryMode.PERSISTENT)
# RabbitMQ's direct reply-to pseudo-queue: a request naming it must be published on the channel that consumes it.
DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"


class PublishError(Exception):
    """The broker did not take a message: down, unroutable, nacked or too slow to confirm."""


@dataclass(frozen=True)
class Outgoing:
    """One message to publish, independent of how it is stored (outbox) or sent."""

    exchange: str
    routing_key: str
    body: bytes
    headers: dict[str, Any] = field(default_factory=dict)
    priority: int | None = None
    expiration_ms: int | None = None
    message_id: str | None = None
    # Publish/subscribe events go without it: an event nobody subscribes to is not an error (rule 1).
    mandatory: bool = True
    reply_to: str | None = None
    correlation_id: str | None = None


class Broker:
    """A robust connection that comes up whenever the broker does, with one confirming publish channel. `url` may
    list several nodes of one cluster, comma-separated: it connects to the first that answers, and after a loss
    to the next one that does."""

    def __init__(self, url: str, topology: Topology, publish_timeout: float, name: str = "publisher") -> None:
        self._nodes = node_urls(url)
        self._topology = topology
        self._timeout = publish_timeout
        self._name = name
        self._connection: FailoverConnection | None = None
        self._channel: AbstractChannel | None = None
        self._plain: AbstractChannel | None = None  # for best-effort sends, opened on first use
        self._plain_opening = asyncio.Lock()
        # Set by the reply inbox: requests that ask for a direct reply go out on the channel that consumes it.
        self.reply_channel: AbstractChannel | None = None
        self._connector: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        # Set instead of `ready` when the broker's queues do not match these settings: retrying cannot help.
        self.mismatch: TopologyMismatch | None = None

    async def start(self, wait: float = 0) -> None:
        """Connect in the background (retrying until the broker answers); wait up to `wait` seconds for it.
        Raise TopologyMismatch when, within that wait, the broker's queues turn out to differ from ours."""
        self._connector = asyncio.create_task(self._connect_until_up(), name=f"broker-{self._name}")
        if wait > 0:
            ready = asyncio.ensure_future(self.ready.wait())
            await asyncio.wait([self._connector, ready], timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            ready.cancel()
            if self.mismatch is not None:
                raise self.mismatch
            if not self.ready.is_set():
                logger.warning("RabbitMQ did not answer within {}s; carrying on and retrying", wait)

    async def _connect_until_up(self) -> None:
        delay, node = 0.5, 0
        while True:
            try:
                connection, channel = await self._connect(node)
            except TopologyMismatch as exc:
                self.mismatch = exc
                logger.error("{}", exc)
                return
            except (OSError, aio_pika.exceptions.AMQPError) as exc:
                logger.warning("RabbitMQ at {} is not answering ({})", _safe(self._nodes[node]), exc)
                node = (node + 1) % len(self._nodes)
                if node == 0:  # every node tried once: wait before the next round
                    logger.warning("no RabbitMQ node answered; retrying in {}s", delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5)
                continue
            self._connection, self._channel = connection, channel
            self.ready.set()
            logger.info("connected to RabbitMQ at {} as {}", _safe(str(connection.url)), self._name)
            return

    async def _connect(self, node: int) -> tuple[FailoverConnection, AbstractChannel]:
        connection = FailoverConnection(
            self._nodes, first=node, client_properties={"connection_name": self._name}, reconnect_interval=1
        )
        try:
            await connection.connect()
            channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
            await declare(channel, self._topology)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(connection.close())
            raise
        return connection, channel

    @property
    def connection(self) -> AbstractRobustConnection:
        if self._connection is None:
            raise PublishError("RabbitMQ is not connected yet")
        return self._connection

    @property
    def is_up(self) -> bool:
        """Connected right now (a robust connection may be between reconnects)."""
        return self._connection is not None and self._connection.connected.is_set()

    @property
    def settled(self) -> bool:
        """Connected, and done restoring channels and consumers after the last reconnect."""
        return self._connection is not None and self.is_up and not self._connection.restoring

    async def publish(self, message: Outgoing) -> None:
        """Publish and wait for the broker's confirm; raise PublishError on anything short of that."""
        if not self.is_up or self._channel is None:
            raise PublishError("RabbitMQ is not connected")
        try:
            # Straight to the AMQP channel: aio-pika's Message and Exchange add nothing we use, at a cost per message.
            source = self.reply_channel if message.reply_to == DIRECT_REPLY_TO else self._channel
            if source is None:
                raise PublishError("the reply channel is not open")
            channel = await source.get_underlay_channel()
            await channel.basic_publish(
                message.body,
                exchange=message.exchange,
                routing_key=message.routing_key,
                properties=_properties(message),
                mandatory=message.mandatory,
                timeout=self._timeout,
            )
        except (TimeoutError, aio_pika.exceptions.AMQPError, OSError, RuntimeError) as exc:
            raise self._failed(exc) from exc

    async def send(self, message: Outgoing) -> bool:
        """Publish best effort, with no confirm and no `mandatory` (a direct reply); False when it did not go out."""
        if not self.is_up:
            return False
        try:
            channel = await (await self._plain_channel()).get_underlay_channel()
            await channel.basic_publish(
                message.body,
                exchange=message.exchange,
                routing_key=message.routing_key,
                properties=_properties(message),
                timeout=self._timeout,
            )
        except (TimeoutError, aio_pika.exceptions.AMQPError, OSError, RuntimeError) as exc:
            logger.info("could not send a message to {}: {}", message.routing_key, exc)
            return False
        return True

    async def _plain_channel(self) -> AbstractChannel:
        async with self._plain_opening:
            if self._plain is None or self._plain.is_closed:
                self._plain = await self.connection.channel(publisher_confirms=False)
            return self._plain

    async def publish_many(self, messages: list[Outgoing]) -> list[PublishError | None]:
        """Publish with the confirms awaited together, the frames of every message written at once; one result per
        message, None when confirmed."""
        if len(messages) < 2 or any(m.reply_to == DIRECT_REPLY_TO for m in messages):
            return await self._publish_each(messages)
        if not self.is_up or self._channel is None:
            return [PublishError("RabbitMQ is not connected")] * len(messages)
        frames = [Frames(m.body, m.exchange, m.routing_key, _properties(m), m.mandatory) for m in messages]
        try:
            channel = await self._channel.get_underlay_channel()
            outcomes = await publish_together(channel, frames, self._timeout)
        except (TimeoutError, aio_pika.exceptions.AMQPError, OSError, RuntimeError) as exc:
            return [self._failed(exc)] * len(messages)
        return [None if outcome is None else self._failed(outcome) for outcome in outcomes]

    def _failed(self, exc: BaseException) -> PublishError:
        """What a publish that did not end in a confirm says: no answer in time, or what went wrong."""
        if isinstance(exc, TimeoutError):
            return PublishError(f"no confirm within {self._timeout}s")
        return PublishError(f"{type(exc).__name__}: {exc}")

    async def _publish_each(self, messages: list[Outgoing]) -> list[PublishError | None]:
        results = await asyncio.gather(*(self.publish(m) for m in messages), return_exceptions=True)
        out: list[PublishError | None] = []
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, PublishError):
                raise result
            out.append(result)
        return out

    async def queue_depth(self, name: str) -> int | None:
        """Messages ready in a queue, by a passive declare on a channel of its own; None when unknown."""
        counts = await self.queue_counts(name)
        return None if counts is None else counts[0]

    async def queue_counts(self, name: str) -> tuple[int, int] | None:
        """A queue's messages ready and its consumers, by a passive declare on a channel of its own; None when
        unknown."""
        if not self.is_up:
            return None
        channel = await self.connection.channel()
        try:
            queue = await channel.declare_queue(name, passive=True)
            result = queue.declaration_result
            return result.message_count or 0, result.consumer_count or 0
        except aio_pika.exceptions.AMQPError:
            return None
        finally:
            if not channel.is_closed:
                await channel.close()

    async def close(self) -> None:
        if self._connector is not None and not self._connector.done():
            self._connector.cancel()
            await asyncio.gather(self._connector, return_exceptions=True)
        if self._connection is not None:
            await self._connection.close()
        self.ready.clear()


def _properties(message: Outgoing) -> aiormq.spec.Basic.Properties:
    return aiormq.spec.Basic.Properties(
        content_type="application/json",
        delivery_mode=PERSISTENT,
        headers=message.headers,
        message_id=message.message_id,
        priority=message.priority,
        expiration=str(message.expiration_ms) if message.expiration_ms else None,
        reply_to=message.reply_to,
        correlation_id=message.correlation_id,
    )


def _safe(url: str) -> str:
    """The URL without its password, for log lines."""
    if "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{rest.split('@', 1)[1]}"


async def consume_when_up(broker: Broker, consume: Callable[[], Awaitable[None]], what: str) -> None:
    """Once the broker is up, run `consume` (declare a queue and start consuming it), retrying with a delay that
    doubles from 0.5 s up to 5 s while it fails."""
    await broker.ready.wait()
    delay = 0.5
    while True:
        try:
            await consume()
            return
        except (OSError, aio_pika.exceptions.AMQPError) as exc:
            logger.warning("{} could not start ({}); retrying in {}s", what, exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5)


async def consuming(channel: AbstractChannel, tag: str) -> bool:
    """Whether `channel` is open and the broker delivers to consumer `tag` on it. A robust channel whose restore
    failed after a reconnect is not, and aio-pika does not try again on its own."""
    if channel.is_closed:
        return False
    try:
        underlay = cast(aiormq.Channel, await asyncio.wait_for(channel.get_underlay_channel(), timeout=1))
    except Exception:  # not open, or not reopened within the second
        return False
    return not underlay.is_closed and tag in underlay.consumers
