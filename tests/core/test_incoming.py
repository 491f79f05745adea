"""Consuming through app/core/incoming.py, on the real broker: a `Handler` on our connections' queues reads the
message aiormq delivered and settles it as aio-pika would, an ordinary callback still gets aio-pika's message,
and after the broker closes the connection aio-pika restores the consumer with the same lean handling."""

import asyncio
import subprocess
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage, AbstractQueue

from app.core.failover import FailoverConnection
from app.core.incoming import AlreadySettled, Handler, Incoming, Message
from tests.conftest import NS, RABBITMQ_URL
from tests.support import BrokerProbe, wait_for


class Lean:
    def __init__(self) -> None:
        self.name = f"{NS}.test-incoming-{uuid.uuid4().hex[:8]}"
        self.received: asyncio.Queue[Message] = asyncio.Queue()

    async def take(self) -> Message:
        return await asyncio.wait_for(self.received.get(), timeout=10)


@pytest.fixture
async def lean() -> AsyncIterator[tuple[Lean, FailoverConnection, AbstractQueue]]:
    spec = Lean()
    connection = FailoverConnection(
        [RABBITMQ_URL], client_properties={"connection_name": spec.name}, reconnect_interval=0.2
    )
    await connection.connect()
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=1)
    queue = await channel.declare_queue(spec.name, durable=True)  # its messages outlive a reconnect
    try:
        yield spec, connection, queue
    finally:
        await queue.delete(if_unused=False, if_empty=False)
        await connection.close()


async def publish(broker: BrokerProbe, queue: str, body: bytes, **properties: Any) -> None:
    await broker.channel.default_exchange.publish(aio_pika.Message(body, **properties), routing_key=queue)


async def test_a_handler_reads_the_delivered_message_and_acks_it_once(
    lean: tuple[Lean, FailoverConnection, AbstractQueue], broker: BrokerProbe
) -> None:
    spec, _, queue = lean
    await queue.consume(Handler(spec.received.put))
    await publish(
        broker,
        spec.name,
        b'{"n": 1}',
        headers={"x-request-id": "req-1", "x-retry-count": 2},
        message_id="m-1",
        priority=7,
        reply_to="replies",
        correlation_id="c-1",
    )
    message = await spec.take()
    assert isinstance(message, Incoming)
    assert message.body == b'{"n": 1}'
    assert dict(message.headers) == {"x-request-id": "req-1", "x-retry-count": 2}
    assert (message.message_id, message.priority, message.reply_to, message.correlation_id) == (
        "m-1",
        7,
        "replies",
        "c-1",
    )
    assert message.redelivered is False
    await message.ack()
    with pytest.raises(AlreadySettled):
        await message.ack()
    await wait_for(lambda: _depth_is(broker, spec.name, 0))


async def test_a_nacked_message_comes_back_redelivered_and_a_rejected_one_is_gone(
    lean: tuple[Lean, FailoverConnection, AbstractQueue], broker: BrokerProbe
) -> None:
    spec, _, queue = lean
    await queue.consume(Handler(spec.received.put))
    await publish(broker, spec.name, b"again", message_id="m-2")
    first = await spec.take()
    assert first.redelivered is False
    await first.nack(requeue=True)
    second = await spec.take()
    assert (second.body, second.message_id, second.redelivered) == (b"again", "m-2", True)
    await second.reject(requeue=False)
    with pytest.raises(AlreadySettled):
        await second.nack(requeue=True)
    await wait_for(lambda: _depth_is(broker, spec.name, 0))


async def test_an_ordinary_callback_still_gets_aio_pikas_message(
    lean: tuple[Lean, FailoverConnection, AbstractQueue], broker: BrokerProbe
) -> None:
    spec, _, queue = lean
    got: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
    await queue.consume(got.put)
    await publish(broker, spec.name, b"plain", message_id="m-3")
    message = await asyncio.wait_for(got.get(), timeout=10)
    assert isinstance(message, aio_pika.IncomingMessage)
    assert message.body == b"plain"
    await message.ack()


async def test_after_the_broker_closes_the_connection_the_consumer_comes_back_lean(
    lean: tuple[Lean, FailoverConnection, AbstractQueue], broker: BrokerProbe
) -> None:
    spec, connection, queue = lean
    await queue.consume(Handler(spec.received.put))
    await wait_for(lambda: _consumers_are(broker, spec.name, 1))
    _close_connection_named(spec.name)
    await wait_for(lambda: _consumers_are(broker, spec.name, 0))
    await wait_for(lambda: _consumers_are(broker, spec.name, 1))  # aio-pika restored it on a new connection
    await wait_for(lambda: _settled(connection))
    await publish(broker, spec.name, b"after", message_id="m-4")
    message = await spec.take()
    assert isinstance(message, Incoming)
    assert message.body == b"after"
    await message.ack()  # on the new channel
    await wait_for(lambda: _depth_is(broker, spec.name, 0))


def _close_connection_named(name: str) -> None:
    listed = subprocess.run(
        ["rabbitmqctl", "-q", "--no-table-headers", "list_connections", "pid", "client_properties"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    pids = [line.split("\t")[0] for line in listed.splitlines() if f'"connection_name","{name}"' in line]
    assert len(pids) == 1, listed
    subprocess.run(["rabbitmqctl", "close_connection", pids[0], "test"], check=True, capture_output=True, timeout=60)


async def _depth_is(broker: BrokerProbe, queue: str, expected: int) -> bool:
    return await broker.depth(queue) == expected


async def _consumers_are(broker: BrokerProbe, queue: str, expected: int) -> bool:
    return await broker.consumers(queue) == expected


async def _settled(connection: FailoverConnection) -> bool:
    return connection.connected.is_set() and not connection.restoring
