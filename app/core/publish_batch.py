"""Many confirmed publishes as one write (rule 17 applied to publishing): the frames of every message go to the
socket together, under one hold of the channel's lock, and their confirms are awaited together.

aiormq publishes one message per call, and each call takes the channel's lock, arms its own timeout, marshals
its own frames and waits for its own write; a batch of 500 job messages paid that 500 times. `publish_together`
does what `aiormq.Channel.basic_publish` does for each message, for all of them at once, through the same
channel state (its delivery tags, its confirmations, its message ids for returns), so the broker's confirms,
nacks and returns are still read and matched by aiormq's own reader. It uses these parts of aiormq (pinned in
requirements.txt): `Channel.lock`, `delivery_tag`, `confirmations`, `message_id_delivery_tag`, `write_queue`,
`create_future`, `number`, `max_content_size`, and `abc.ChannelFrame.marshall`; tests/core/test_publish_batch.py
checks confirms, a return and a closed channel against the real broker."""

import asyncio
import uuid
from dataclasses import dataclass
from functools import partial

import aiormq
from aiormq.abc import AbstractChannel, ChannelFrame
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

Outcome = BaseException | None  # None: confirmed


@dataclass(frozen=True)
class Frames:
    """One message as its publish frame, content header and body."""

    body: bytes
    exchange: str
    routing_key: str
    properties: aiormq.spec.Basic.Properties
    mandatory: bool


async def publish_together(underlay: AbstractChannel, messages: list[Frames], within: float) -> list[Outcome]:
    """Publish on a confirming channel; one outcome per message: None when confirmed, else what the broker said
    (a nack, a return) or TimeoutError when no answer came `within` seconds. Raises what aiormq raises for a
    channel that is closed or closes while the frames are written (nothing is then known of any message)."""
    if not messages:
        return []
    if not isinstance(underlay, aiormq.Channel):
        raise TypeError(f"publish_together works on aiormq's Channel, not {type(underlay).__name__}")
    channel = underlay
    if not channel.publisher_confirms:
        raise ValueError("publish_together needs a channel with publisher confirms")
    confirmations: list[asyncio.Future[object]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    try:
        async with asyncio.timeout(within), channel.lock:
            first, sent = channel.delivery_tag + 1, False
            try:
                frames: list[object] = []
                for message in messages:
                    frames += _register(channel, message, confirmations)
                drain = channel.create_future()
                await channel.write_queue.put(
                    ChannelFrame.marshall(channel_number=channel.number, frames=frames, drain_future=drain)  # type: ignore[arg-type]
                )
                sent = True
            finally:
                if not sent:
                    _unregister(channel, first, confirmations)  # the broker saw none of them
            await drain
    except BaseException:
        for confirmation in confirmations:
            confirmation.cancel()  # aiormq ignores a confirm that comes after this
        raise
    _, late = await asyncio.wait(confirmations, timeout=max(0.0, deadline - loop.time()))
    for confirmation in late:
        confirmation.cancel()
    return [_outcome(confirmation) for confirmation in confirmations]


def _outcome(confirmation: "asyncio.Future[object]") -> Outcome:
    if confirmation.cancelled():
        return TimeoutError("no confirm in time")
    return confirmation.exception()  # a nack or a return (aiormq's DeliveryError, PublishError), or None


def _register(channel: aiormq.Channel, message: Frames, confirmations: list["asyncio.Future[object]"]) -> list[object]:
    """Take the message's delivery tag and confirmation future, as basic_publish does; its frames."""
    properties = message.properties
    if not properties.message_id:
        properties.message_id = uuid.uuid4().hex  # a return is matched to its message by message id
    channel.delivery_tag += 1
    tag = channel.delivery_tag
    confirmation: asyncio.Future[object] = channel.create_future()
    channel.confirmations[tag] = confirmation
    channel.message_id_delivery_tag[properties.message_id] = tag
    confirmation.add_done_callback(partial(_forget_message_id, channel, properties.message_id, tag))
    confirmations.append(confirmation)
    publish = aiormq.spec.Basic.Publish(
        exchange=message.exchange, routing_key=message.routing_key, mandatory=message.mandatory
    )
    header = ContentHeader(properties=properties, body_size=len(message.body))
    size = channel.max_content_size
    chunks = [ContentBody(message.body[i : i + size]) for i in range(0, len(message.body), size)]
    return [publish, header, *chunks]


def _unregister(channel: aiormq.Channel, first: int, confirmations: list["asyncio.Future[object]"]) -> None:
    for offset, confirmation in enumerate(confirmations):
        channel.confirmations.pop(first + offset, None)
        confirmation.cancel()
    channel.delivery_tag = first - 1


def _forget_message_id(channel: aiormq.Channel, message_id: str, tag: int, _: object) -> None:
    if channel.message_id_delivery_tag.get(message_id) == tag:
        channel.message_id_delivery_tag.pop(message_id)
