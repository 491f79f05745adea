"""The DLQ janitor: walks a broker dead-letter queue, removes messages whose job or delivery no longer needs
them (replayed, redelivered) and the extra copies of one that does (rule 4 rejects every copy of a dead job's
message it is handed, and a publish may have been repeated), sends back to its queue a message a quorum queue
dead-lettered past its delivery limit while its job or delivery is unfinished, and leaves every other message in
place and in order."""

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from loguru import logger
from sqlalchemy import ColumnElement, Table, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker, Outgoing
from app.core.statuses import TERMINAL, DeliveryStatus, JobStatus
from app.models.tables import DELIVERIES, JOBS

MAX_PER_SWEEP = 1000
# The reason a quorum queue gives when it dead-letters a message returned more often than its x-delivery-limit.
DELIVERY_LIMIT = "delivery_limit"

# ids of the messages taken -> the ids that are still dead (so their messages stay)
StillDead = Callable[[list[str]], Awaitable[set[str]]]


@dataclass(frozen=True)
class DlqJanitor:
    engine: AsyncEngine
    broker: Broker
    jobs_dlq: str
    webhooks_dlq: str

    async def sweep(self) -> dict[str, int]:
        """One pass over both DLQs; how many messages each lost."""
        return {
            self.jobs_dlq: await self._sweep(self.jobs_dlq, _job_id, self._dead_jobs, self._unfinished_jobs),
            self.webhooks_dlq: await self._sweep(
                self.webhooks_dlq, _delivery_id, self._failed_deliveries, self._pending_deliveries
            ),
        }

    async def _sweep(
        self,
        queue_name: str,
        key: Callable[[AbstractIncomingMessage], str],
        still_dead: StillDead,
        unfinished: StillDead,
    ) -> int:
        channel = await self.broker.connection.channel()
        try:
            taken = await self._take(channel, queue_name)
            keep = await still_dead([key(m) for m in taken])
            over_limit = {key(m): m for m in taken if key(m) not in keep and _from_queue(m, DELIVERY_LIMIT)}
            back = await unfinished(list(over_limit)) if over_limit else set()
            removed, kept = 0, set()
            # Returned in the order taken: a classic queue puts each back in its old place anyway, a quorum queue
            # hands returned messages out first, in the order they came back, so the order stays as it was.
            for message in taken:
                if key(message) in keep and key(message) not in kept:
                    kept.add(key(message))
                    await message.nack(requeue=True)
                    continue
                if key(message) in back:
                    await self._send_back(message)
                await message.ack()
                removed += 1
            return removed
        finally:
            await channel.close()

    async def _send_back(self, message: AbstractIncomingMessage) -> None:
        """Publish a message dead-lettered past the delivery limit to the queue it came from, with a fresh count;
        raising (PublishError) leaves it unacked, so it stays in the DLQ for the next sweep."""
        queue = _from_queue(message, DELIVERY_LIMIT)
        headers = {k: v for k, v in (message.headers or {}).items() if not k.startswith("x-")}
        logger.warning(
            "returning {} to {}: its queue's delivery limit dead-lettered it unfinished", _job_id(message), queue
        )
        outgoing = Outgoing("", queue, message.body, headers=headers, message_id=message.message_id)
        await self.broker.publish(outgoing)

    async def _take(self, channel: AbstractChannel, queue_name: str) -> list[AbstractIncomingMessage]:
        queue = await channel.declare_queue(queue_name, passive=True)
        depth = min(queue.declaration_result.message_count or 0, MAX_PER_SWEEP)
        taken = []
        for _ in range(depth):
            message = await queue.get(no_ack=False, fail=False)
            if message is None:
                break
            taken.append(message)
        return taken

    async def _dead_jobs(self, ids: list[str]) -> set[str]:
        return await self._among(JOBS, ids, JOBS.c.status == JobStatus.DEAD_LETTERED) if ids else set()

    async def _failed_deliveries(self, ids: list[str]) -> set[str]:
        return await self._among(DELIVERIES, ids, DELIVERIES.c.status == DeliveryStatus.FAILED) if ids else set()

    async def _unfinished_jobs(self, ids: list[str]) -> set[str]:
        return await self._among(JOBS, ids, JOBS.c.status.not_in(TERMINAL))

    async def _pending_deliveries(self, ids: list[str]) -> set[str]:
        return await self._among(DELIVERIES, ids, DELIVERIES.c.status == DeliveryStatus.PENDING)

    async def _among(self, table: Table, ids: list[str], condition: ColumnElement[bool]) -> set[str]:
        """The ids among these whose rows meet `condition`."""
        query = select(table.c.id).where(table.c.id.in_(ids), condition)
        async with self.engine.connect() as conn:
            return set((await conn.execute(query)).scalars())

    async def cycle(self) -> None:
        """One cycle of the background worker: a sweep while the broker is up."""
        if self.broker.is_up:
            removed = await self.sweep()
            if any(removed.values()):
                logger.info("DLQ janitor removed {}", removed)


def _from_queue(message: AbstractIncomingMessage, reason: str) -> str:
    """The queue the broker's first x-death entry names when it gives `reason`; empty otherwise."""
    deaths = (message.headers or {}).get("x-death")
    if not isinstance(deaths, list) or not deaths or not isinstance(deaths[0], dict):
        return ""
    first = deaths[0]
    return str(first.get("queue", "")) if first.get("reason") == reason else ""


def _job_id(message: AbstractIncomingMessage) -> str:
    return message.message_id or _body_field(message, "job_id")


def _delivery_id(message: AbstractIncomingMessage) -> str:
    return message.message_id or _body_field(message, "delivery_id")


def _body_field(message: AbstractIncomingMessage, name: str) -> str:
    try:
        return str(json.loads(message.body).get(name, ""))
    except (ValueError, AttributeError):
        return ""
