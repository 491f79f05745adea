"""The outbox (rule 2): messages committed with their DB change, published right after, relayed if not."""

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from loguru import logger

from app.core import tracing
from app.core.broker import Broker, Outgoing, PublishError
from app.core.database import is_unreachable
from app.core.group_commit import GroupCommit
from app.core.messages import BUNDLE_MAX, bundle
from app.models.types import utcnow
from app.stores.jobs import JobStore
from app.stores.outbox import ROWS_PER_STATEMENT, OutboxStore, Pending, from_row


class Outbox:
    """The one way a staged message goes out: `publish` (or `publish_soon`) sends rows with their confirms
    awaited together; confirmed rows are forgotten in group commits, a job message's row in the same
    transaction that moves its job pending -> queued; the relay sends, the same way, whatever was missed."""

    def __init__(
        self,
        jobs: JobStore,
        rows: OutboxStore,
        broker: Broker,
        relay_after: float,
        batch_size: int,
        hold_seconds: float,
        pubsub: frozenset[str] = frozenset(),
    ) -> None:
        """`pubsub` names the exchanges whose messages go without `mandatory` (events, rule 1). A relay pass
        holds the rows it took for `hold_seconds`: another relay leaves them alone that long, and takes them
        after it, so rows held by a relay that died mid-pass wait no longer than that. A job message's confirmed
        row goes with its job's pending -> queued step (`jobs.queue_published`)."""
        self._jobs = jobs
        self._rows = rows
        self._pubsub = pubsub
        self._broker = broker
        self._relay_after = relay_after
        self._batch_size = batch_size
        self._hold_seconds = hold_seconds
        self._sent: list[Pending] = []  # confirmed event rows, forgotten in bulk by the relay loop
        self._tasks: set[asyncio.Task[Any]] = set()
        self._forgetting = GroupCommit("outbox-sent", self._forget_batches, systemic=is_unreachable)

    def publish_soon(self, staged: list[Pending]) -> None:
        """Publish in the background, so a caller's answer does not wait on the confirm."""
        if staged:
            self._track(self.publish(staged))

    async def publish(self, staged: list[Pending]) -> list[bool]:
        """Publish now, confirms awaited together; True for each row the broker confirmed (the relay retries
        the others). Job messages' rows are forgotten at once (their jobs become queued), events' in bulk."""
        if not staged:
            return []
        messages, carried = self._bundled([p.message for p in staged])
        with tracing.span("taskq.publish", **{"messaging.batch.message_count": len(messages)}):
            outcomes = await self._broker.publish_many(messages)
        errors: list[PublishError | None] = [None] * len(staged)
        for error, rows in zip(outcomes, carried, strict=True):
            for row in rows:
                errors[row] = error
        sent = [p for p, error in zip(staged, errors, strict=True) if error is None]
        jobs = [p for p in sent if p.job_id is not None]
        self._sent.extend(p for p in sent if p.job_id is None)
        if jobs:
            self._track(self._forget_jobs(jobs))
        return [error is None for error in errors]

    def _bundled(self, messages: list[Outgoing]) -> tuple[list[Outgoing], list[list[int]]]:
        """Publish/subscribe events sharing a routing key go out as bundles of up to BUNDLE_MAX (one publish and
        one confirm for all of them); every other message alone. With each message, the rows it carries."""
        alone: list[int] = []
        groups: dict[tuple[str, str], list[int]] = {}
        for index, message in enumerate(messages):
            if message.exchange in self._pubsub:
                groups.setdefault((message.exchange, message.routing_key), []).append(index)
            else:
                alone.append(index)
        carried = [[index] for index in alone]
        for rows in groups.values():
            carried += [rows[start : start + BUNDLE_MAX] for start in range(0, len(rows), BUNDLE_MAX)]
        return [bundle([messages[row] for row in rows]) for rows in carried], carried

    def _track(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _forget_jobs(self, rows: list[Pending]) -> None:
        try:
            await self._forgetting.run(rows)
        except Exception as exc:  # the relay sends them again and queues the jobs; workers claim from pending
            level = "WARNING" if is_unreachable(exc) else "ERROR"
            logger.opt(exception=level == "ERROR").log(level, "could not mark {} job(s) queued: {}", len(rows), exc)

    async def _forget_batches(self, batches: list[list[Pending]]) -> list[None]:
        await self._forget([row for rows in batches for row in rows])
        return [None] * len(batches)

    async def _forget(self, rows: list[Pending]) -> None:
        """Delete confirmed rows and move their jobs pending -> queued; publish what follows. On PostgreSQL each
        chunk is one statement, a transaction by itself; elsewhere all of them share one transaction."""
        follow: list[Pending] = []
        async with self._jobs.one_transaction() as conn:
            for start in range(0, len(rows), ROWS_PER_STATEMENT):
                chunk = rows[start : start + ROWS_PER_STATEMENT]
                job_ids = [row.job_id for row in chunk if row.job_id is not None]
                if job_ids:
                    follow += await self._jobs.queue_published(conn, job_ids, [row.id for row in chunk])
                else:
                    await self._rows.drop(conn, [row.id for row in chunk])
        self.publish_soon(follow)

    async def flush(self) -> None:
        """Wait for the publishes in flight, then forget every confirmed row."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        while self._sent:
            batch, self._sent = self._sent[: self._batch_size], self._sent[self._batch_size :]
            await self._forget(batch)

    async def close(self) -> None:
        """Shutdown: everything in flight published and forgotten."""
        await self.flush()
        await self._forgetting.close()

    async def relay_once(self) -> int:
        """Publish rows older than `relay_after` that nobody else is relaying; return how many went out."""
        rows = await self._claim()
        if not rows:
            return 0
        sent = sum(await self.publish(rows))
        await self.flush()
        if sent:
            logger.info("relayed {} outbox message(s)", sent)
        return sent

    async def _claim(self) -> list[Pending]:
        now = utcnow()
        older_than = now - timedelta(seconds=self._relay_after)
        held = await self._rows.take_stale(older_than, now + timedelta(seconds=self._hold_seconds), self._batch_size)
        return [from_row(row, self._pubsub) for row in held]

    async def relay_cycle(self) -> None:
        """One cycle of the relay (a background worker): forget what was confirmed, relay what was missed."""
        await self.flush()
        if self._broker.is_up:
            await self.relay_once()
