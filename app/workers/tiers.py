"""Sending a message back to wait in a delay tier: the one way the job and the webhook workers defer or retry a
message (its delay set by the tier queue's TTL and the message's own expiration)."""

from typing import Any

from app.core.broker import Broker, Outgoing
from app.core.incoming import Message


async def to_tier(
    broker: Broker,
    exchange: str,
    queue: str,
    message: Message,
    headers: dict[str, Any],
    expiration_ms: int,
    message_id: str | None,
) -> None:
    """Publish `message`'s body into the tier queue `queue` with `headers`; its priority and any reply address
    (a waiting submitter's, answered by the run after the delay) ride along. Raising leaves the original
    unacked."""
    outgoing = Outgoing(
        exchange,
        queue,
        message.body,
        headers,
        message.priority,
        expiration_ms,
        message_id,
        reply_to=message.reply_to,
        correlation_id=message.correlation_id,
    )
    await broker.publish(outgoing)


def int_header(message: Message, name: str) -> int:
    """A whole-number header a tier carries (the retry count), 0 when it is missing or not a number."""
    value = (message.headers or {}).get(name)
    return value if isinstance(value, int) else 0
