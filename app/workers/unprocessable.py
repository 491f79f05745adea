"""Messages the service itself fails to process: its own code path for a message raising (a bug, or stored
values that code cannot handle), as opposed to a handler's failure (the retry policy's) or an outage. Each
failure is counted in a header of the message, which goes back to its queue with the count one higher; at the
TRIES-th the worker gives the message up (its job or delivery dead-lettered as `unprocessable`, the message
into the DLQ), so it can never come back for ever. A message returned by an outage is not counted."""

from typing import Any

import sqlalchemy.exc
from aio_pika.exceptions import AMQPError
from redis.exceptions import RedisError

from app.core.broker import Outgoing, PublishError
from app.core.database import is_unreachable, sqlstate
from app.core.group_commit import GroupCommitClosed
from app.core.incoming import Message
from app.core.messages import FAILURES_HEADER

TRIES = 3
# SQLSTATEs of a database refusing for a while, not for good: serialization failures and deadlocks (40),
# insufficient resources (53), a lock not available (55P03), a statement cancelled or timed out (57014).
PASSING_STATES = ("40", "53", "55P03", "57014")
OUTAGES = (OSError, TimeoutError, PublishError, RedisError, AMQPError, GroupCommitClosed, sqlalchemy.exc.TimeoutError)
MESSAGE_CHARS = 500  # of an error stored on a job: a driver's message, never a statement's text and parameters


def is_outage(exc: BaseException) -> bool:
    """Whether an error is about a resource (database, broker, Redis) rather than the message: a message failing
    so comes back as often as it takes, uncounted."""
    if is_unreachable(exc) or isinstance(exc, OUTAGES):
        return True
    state = sqlstate(exc)
    return state is not None and state.startswith(PASSING_STATES)


def failures(message: Message) -> int:
    """How many times the service has failed to process this message before."""
    value = (message.headers or {}).get(FAILURES_HEADER)
    return value if isinstance(value, int) and value > 0 else 0


def again(message: Message, queue: str, failed: int) -> Outgoing:
    """The message as it came, back to its own queue (the default exchange routes by queue name), with the
    failures counted so far."""
    headers: dict[str, Any] = {**(message.headers or {}), FAILURES_HEADER: failed}
    return Outgoing(
        "",
        queue,
        message.body,
        headers,
        message.priority,
        message_id=message.message_id,
        reply_to=message.reply_to,
        correlation_id=message.correlation_id,
    )


def error_of(exc: BaseException) -> dict[str, Any]:
    """How the error that made a message unprocessable is stored: its type and the driver's or its own message,
    its first line, cut short."""
    cause = getattr(exc, "orig", None) or exc
    first = (str(cause) or type(cause).__name__).strip().splitlines()[0]
    return {"type": type(exc).__name__, "message": first[:MESSAGE_CHARS]}
