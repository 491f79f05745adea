"""Many confirmed publishes written at once (app/core/publish_batch.py), against the real broker: each message
gets its own outcome, a returned one fails alone, a big body is split, and the channel stays usable."""

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from app.core.broker import Broker, Outgoing, PublishError
from tests.conftest import RABBITMQ_URL
from tests.support import BrokerProbe, wait_for


@pytest.fixture
async def publisher(broker: BrokerProbe) -> AsyncIterator[Broker]:
    publisher = Broker(RABBITMQ_URL, broker.topology, 5, name="test-publish-batch")
    await publisher.start(wait=10)
    try:
        yield publisher
    finally:
        await publisher.close()


async def test_every_message_is_confirmed_and_arrives_whole(publisher: Broker, broker: BrokerProbe) -> None:
    queue = await broker.channel.declare_queue(exclusive=True)
    big = bytes(range(256)) * 1200  # 307,200 bytes: more than one content frame
    messages = [Outgoing("", queue.name, f"m{n}".encode(), {"n": n}, message_id=f"id-{n}") for n in range(50)]
    messages.append(Outgoing("", queue.name, big, message_id="id-big"))

    assert await publisher.publish_many(messages) == [None] * 51

    await wait_for(_depth(broker, queue.name, 51), within=10)
    got = await broker.take_all(queue.name)
    assert [m.message_id for m in got] == [m.message_id for m in messages]
    assert [m.body for m in got] == [m.body for m in messages]
    assert [m.headers.get("n") for m in got[:50]] == list(range(50))
    # The channel's delivery tags stayed in step: a lone publish after the batch is confirmed too.
    await publisher.publish(Outgoing("", queue.name, b"after", message_id="id-after"))
    await wait_for(_depth(broker, queue.name, 1), within=10)
    assert [m.body for m in await broker.take_all(queue.name)] == [b"after"]


async def test_a_returned_message_fails_alone(publisher: Broker, broker: BrokerProbe) -> None:
    queue = await broker.channel.declare_queue(exclusive=True)
    nowhere = "no-such-queue-" + uuid.uuid4().hex
    messages = [
        Outgoing("", queue.name, b"first", message_id="r-1"),
        Outgoing("", nowhere, b"lost", message_id="r-2"),  # mandatory: the broker returns it
        Outgoing("", queue.name, b"third", message_id="r-3"),
    ]

    first, lost, third = await publisher.publish_many(messages)

    assert first is None and third is None
    assert isinstance(lost, PublishError) and "NO_ROUTE" in str(lost)
    await wait_for(_depth(broker, queue.name, 2), within=10)
    assert [m.body for m in await broker.take_all(queue.name)] == [b"first", b"third"]


async def test_a_closed_channel_fails_every_message(publisher: Broker, broker: BrokerProbe) -> None:
    queue = await broker.channel.declare_queue(exclusive=True)
    await publisher.close()
    messages = [Outgoing("", queue.name, b"x", message_id=f"c-{n}") for n in range(3)]

    outcomes = await publisher.publish_many(messages)

    assert [type(outcome) for outcome in outcomes] == [PublishError] * 3
    assert await broker.depth(queue.name) == 0


def _depth(broker: BrokerProbe, queue: str, count: int) -> Callable[[], Awaitable[bool]]:
    async def reached() -> bool:
        return await broker.depth(queue) == count

    return reached
