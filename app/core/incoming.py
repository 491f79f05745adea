"""Consuming without aio-pika's per-message wrapping, for the workers' hot paths.

For every message aio-pika builds an `IncomingMessage` (a copy of all its properties, each set through a checking
`__setattr__`) and starts a second task for the callback, beside the one aiormq starts: about 7 % of a job
worker's CPU at a full drain. A `Handler` given to a `LeanQueue` is called with an `Incoming` instead: the
message aiormq delivered, read where it lies, in aiormq's own task. Given to any other queue, the same `Handler`
takes aio-pika's `IncomingMessage`, which reads the same (`Message`).

A `LeanQueue` is the robust queue of every channel of our connections (`LeanChannel`), so aio-pika still
restores the consumer after a reconnect, on the queue's channel, with the same `Handler`; an ordinary callback
consumes as it always did.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import aiormq
from aio_pika import RobustChannel, RobustQueue
from aio_pika.abc import AbstractIncomingMessage, ConsumerTag
from aiormq.abc import DeliveredMessage


class Message(Protocol):
    """What a consumer's handler reads of a message and does with it: `Incoming` and aio-pika's
    `IncomingMessage` alike."""

    @property
    def body(self) -> bytes: ...
    @property
    def headers(self) -> Mapping[str, Any]: ...
    @property
    def message_id(self) -> str | None: ...
    @property
    def priority(self) -> int | None: ...
    @property
    def reply_to(self) -> str | None: ...
    @property
    def correlation_id(self) -> str | None: ...
    @property
    def redelivered(self) -> bool | None: ...

    async def ack(self) -> None: ...
    async def reject(self, *, requeue: bool = False) -> None: ...
    async def nack(self, *, requeue: bool = True) -> None: ...


MessageHandler = Callable[[Message], Awaitable[None]]
"""A consumer's handler: what it does with each message."""


class AlreadySettled(RuntimeError):
    """A message acked, rejected or nacked a second time: a bug, as aio-pika says with MessageProcessError."""


class Incoming:
    """A message as aiormq delivered it, settled on its own channel (an ack on a channel that has closed since
    raises, as aio-pika's does: the broker redelivers the message)."""

    __slots__ = ("_delivered", "_settled")

    def __init__(self, delivered: DeliveredMessage) -> None:
        self._delivered = delivered
        self._settled = False

    @property
    def body(self) -> bytes:
        return self._delivered.body

    @property
    def headers(self) -> Mapping[str, Any]:
        return self._delivered.header.properties.headers or {}

    @property
    def message_id(self) -> str | None:
        return self._delivered.header.properties.message_id

    @property
    def priority(self) -> int | None:
        return self._delivered.header.properties.priority

    @property
    def reply_to(self) -> str | None:
        return self._delivered.header.properties.reply_to

    @property
    def correlation_id(self) -> str | None:
        return self._delivered.header.properties.correlation_id

    @property
    def redelivered(self) -> bool | None:
        return self._delivered.redelivered

    def _settle(self) -> int:
        if self._settled:
            raise AlreadySettled(f"message {self.message_id} was already acked, rejected or nacked")
        tag = self._delivered.delivery_tag
        if tag is None:
            raise AlreadySettled(f"message {self.message_id} was not delivered to a consumer")
        self._settled = True
        return tag

    async def ack(self) -> None:
        await self._delivered.channel.basic_ack(self._settle())

    async def reject(self, *, requeue: bool = False) -> None:
        await self._delivered.channel.basic_reject(self._settle(), requeue=requeue)

    async def nack(self, *, requeue: bool = True) -> None:
        await self._delivered.channel.basic_nack(self._settle(), requeue=requeue)


class Handler:
    """A consumer callback: `handle` takes an `Incoming` from a `LeanQueue`, aio-pika's message from any other."""

    __slots__ = ("handle",)

    def __init__(self, handle: MessageHandler) -> None:
        self.handle = handle

    async def __call__(self, message: AbstractIncomingMessage) -> None:
        await self.handle(message)

    async def delivered(self, delivered: DeliveredMessage) -> None:
        await self.handle(Incoming(delivered))


class LeanQueue(RobustQueue):
    async def consume(
        self,
        callback: Callable[[AbstractIncomingMessage], Awaitable[Any]],
        no_ack: bool = False,
        exclusive: bool = False,
        arguments: Any = None,
        consumer_tag: ConsumerTag | None = None,
        timeout: Any = None,  # noqa: ASYNC109 -- the overridden signature
        robust: bool = True,
    ) -> ConsumerTag:
        if not isinstance(callback, Handler) or no_ack:
            return await super().consume(callback, no_ack, exclusive, arguments, consumer_tag, timeout, robust)
        channel: aiormq.abc.AbstractChannel = await self.channel.get_underlay_channel()
        result = await channel.basic_consume(
            self.name,
            callback.delivered,
            exclusive=exclusive,
            arguments=arguments,
            consumer_tag=consumer_tag,
            timeout=timeout,
        )
        tag = result.consumer_tag
        if tag is None:
            raise RuntimeError(f"the broker gave no consumer tag for {self.name}")
        if robust:  # as RobustQueue.consume registers it: restore() calls this again with the same arguments
            self._consumers[tag] = dict(callback=callback, no_ack=no_ack, exclusive=exclusive, arguments=arguments)
        return tag


class LeanChannel(RobustChannel):
    QUEUE_CLASS = LeanQueue
