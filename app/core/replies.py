"""The asking side of direct reply-to (seed 001's RPC): one channel consumes RabbitMQ's reply pseudo-queue, the job
messages of submitters that wait are published on that channel, and each reply wakes its waiter by correlation id."""

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from loguru import logger

from app.core.broker import DIRECT_REPLY_TO, Broker
from app.core.messages import JobReply


@dataclass(frozen=True)
class Expected:
    """The reply one request waits for; no correlation id when none can come (the reply channel is not open)."""

    correlation_id: str | None = None
    arrived: "asyncio.Future[JobReply] | None" = None


class ReplyInbox:
    """Opened once per API process; a lost or late reply only means its waiter learns from the database instead."""

    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._channel: AbstractChannel | None = None
        self._waiting: dict[str, asyncio.Future[JobReply]] = {}
        self._opener: asyncio.Task[None] | None = None
        self.received = 0  # replies that woke a waiting request

    async def start(self) -> None:
        """Open the reply channel in the background, once the broker is up."""
        self._opener = asyncio.create_task(self._open(), name="reply-inbox")

    async def _open(self) -> None:
        await self._broker.ready.wait()
        try:
            # Confirms and returns as on the publish channel: job messages published here are mandatory.
            channel = await self._broker.connection.channel(publisher_confirms=True, on_return_raises=True)
            # Through the robust channel's queue object, so a reconnect consumes again.
            queue = await channel.declare_queue(DIRECT_REPLY_TO, passive=True)
            await queue.consume(self._on_reply, no_ack=True)
        except (aio_pika.exceptions.AMQPError, OSError) as exc:
            logger.warning("no direct replies in this process, waiting requests poll the database: {}", exc)
            return
        self._channel = channel
        self._broker.reply_channel = channel

    @property
    def ready(self) -> bool:
        """Whether a request published now can be answered on this channel."""
        return self._channel is not None and not self._channel.is_closed and self._broker.is_up

    @contextlib.contextmanager
    def expect(self) -> Iterator[Expected]:
        """A correlation id to publish with, and the future its reply resolves, for the block's duration."""
        if not self.ready:
            yield Expected()
            return
        correlation_id = uuid.uuid4().hex
        arrived: asyncio.Future[JobReply] = asyncio.get_running_loop().create_future()
        self._waiting[correlation_id] = arrived
        try:
            yield Expected(correlation_id, arrived)
        finally:
            del self._waiting[correlation_id]

    async def _on_reply(self, message: AbstractIncomingMessage) -> None:
        arrived = self._waiting.get(message.correlation_id or "")
        if arrived is None or arrived.done():
            return  # its request has answered already
        try:
            reply = JobReply.from_bytes(message.body)
        except (ValueError, KeyError, TypeError):
            logger.warning("ignoring a malformed job reply {!r}", message.body[:200])
            return
        self.received += 1
        arrived.set_result(reply)

    async def close(self) -> None:
        """Stop consuming; requests still waiting go on polling until their deadline."""
        if self._opener is not None and not self._opener.done():
            self._opener.cancel()
            await asyncio.gather(self._opener, return_exceptions=True)
        self._broker.reply_channel = None
        if self._channel is not None and not self._channel.is_closed:
            with contextlib.suppress(aio_pika.exceptions.AMQPError, OSError, RuntimeError):
                await self._channel.close()
        self._channel = None
