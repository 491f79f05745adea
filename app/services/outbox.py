"""The outbox (rule 2): messages committed with their DB change, published right after, relayed if not."""

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from loguru import logger
from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.broker import Broker, Outgoing, PublishError
from app.core.database import is_unreachable
from app.core.group_commit import GroupCommit
from app.core.messages import BUNDLE_MAX, bundle
from app.models import pg_batch
from app.models.tables import OUTBOX
from app.models.types import utcnow

ROWS_PER_STATEMENT = 500  # keeps every IN list within MSSQL's 2,100 parameters
INSERT_ROW = insert(OUTBOX)
INSERT_MANY = insert(OUTBOX).returning(OUTBOX.c.id, sort_by_parameter_order=True)

# Moves the jobs whose messages were confirmed pending -> queued and deletes the confirmed rows (the second
# list), in the caller's transaction; returns the events it staged.
AfterJobPublish = Callable[[AsyncConnection, list[str], list[int]], Awaitable[list["Pending"]]]


@dataclass(frozen=True)
class Pending:
    """A committed outbox row and the message it holds."""

    id: int
    message: Outgoing
    job_id: str | None = None


async def add(conn: AsyncConnection, message: Outgoing, job_id: str | None = None) -> Pending:
    """Stage a message in the caller's transaction; it is published after the commit."""
    result = await conn.execute(INSERT_ROW, rows_of([message], utcnow(), [job_id])[0])
    key = result.inserted_primary_key
    assert key is not None
    return Pending(int(key[0]), message, job_id)


async def add_many(
    conn: AsyncConnection, messages: list[Outgoing], job_ids: list[str | None] | None = None
) -> list[Pending]:
    """Stage several messages with one statement; `job_ids` marks job messages (their publish queues the job)."""
    if not messages:
        return []
    owners: list[str | None] = list(job_ids) if job_ids is not None else [None] * len(messages)
    rows = rows_of(messages, utcnow(), owners)
    if pg_batch.applies(conn):
        ids: Iterable[int] = await pg_batch.insert_outbox(conn, rows)
    else:
        ids = (await conn.execute(INSERT_MANY, rows)).scalars()
    return [Pending(int(i), m, j) for i, m, j in zip(ids, messages, owners, strict=True)]


def rows_of(messages: list[Outgoing], now: datetime, job_ids: list[str | None] | None = None) -> list[dict[str, Any]]:
    """The outbox rows that hold `messages` (`job_ids` marks job messages; none are by default), staged at `now`."""
    return [
        {
            "exchange": m.exchange,
            "routing_key": m.routing_key,
            "body": m.body,
            "headers": m.headers,
            "priority": m.priority,
            "message_id": m.message_id,
            "job_id": job_id,
            "created_at": now,
        }
        for m, job_id in zip(messages, job_ids or [None] * len(messages), strict=True)
    ]


async def drop(conn: AsyncConnection, ids: list[int]) -> None:
    """Delete published rows, in the caller's transaction."""
    if pg_batch.applies(conn):
        await pg_batch.drop_outbox(conn, ids)
    else:
        await conn.execute(delete(OUTBOX).where(OUTBOX.c.id.in_(ids)))


def staged_event(exchange: str, event: tuple[int, str, bytes, dict[str, Any], str]) -> Pending:
    """An event a statement staged in SQL: (outbox id, routing key, body, headers, message id)."""
    outbox_id, key, body, headers, message_id = event
    return Pending(outbox_id, Outgoing(exchange, key, body, headers, message_id=message_id, mandatory=False))


def _from_row(row: Any, pubsub: frozenset[str]) -> Pending:
    message = Outgoing(
        row.exchange,
        row.routing_key,
        row.body,
        dict(row.headers or {}),
        row.priority,
        message_id=row.message_id,
        mandatory=row.exchange not in pubsub,
    )
    return Pending(row.id, message, row.job_id)


class Outbox:
    """The one way a staged message goes out: `publish` (or `publish_soon`) sends rows with their confirms
    awaited together; confirmed rows are forgotten in group commits, a job message's row in the same
    transaction that moves its job pending -> queued; the relay sends, the same way, whatever was missed."""

    def __init__(
        self,
        engine: AsyncEngine,
        broker: Broker,
        relay_after: float,
        batch_size: int,
        hold_seconds: float,
        pubsub: frozenset[str] = frozenset(),
    ) -> None:
        """`pubsub` names the exchanges whose messages go without `mandatory` (events, rule 1). A relay pass
        holds the rows it took for `hold_seconds`: another relay leaves them alone that long, and takes them
        after it, so rows held by a relay that died mid-pass wait no longer than that."""
        self._engine = engine
        self._pubsub = pubsub
        self._broker = broker
        self._relay_after = relay_after
        self._batch_size = batch_size
        self._hold_seconds = hold_seconds
        self._sent: list[Pending] = []  # confirmed event rows, forgotten in bulk by the relay loop
        self._tasks: set[asyncio.Task[Any]] = set()
        self._forgetting = GroupCommit("outbox-sent", self._forget_batches, systemic=is_unreachable)
        self.after_job_publish: AfterJobPublish | None = None

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
        async with pg_batch.one_transaction(self._engine) as conn:
            for start in range(0, len(rows), ROWS_PER_STATEMENT):
                chunk = rows[start : start + ROWS_PER_STATEMENT]
                job_ids = [row.job_id for row in chunk if row.job_id is not None]
                if job_ids and self.after_job_publish is not None:
                    follow += await self.after_job_publish(conn, job_ids, [row.id for row in chunk])
                else:
                    await drop(conn, [row.id for row in chunk])
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
        token = str(uuid.uuid4())
        candidates = (
            select(OUTBOX.c.id)
            .where(OUTBOX.c.created_at < now - timedelta(seconds=self._relay_after))
            .where(or_(OUTBOX.c.locked_until.is_(None), OUTBOX.c.locked_until < now))
            .order_by(OUTBOX.c.id)
            .limit(self._batch_size)
        )
        async with self._engine.begin() as conn:
            ids = list((await conn.execute(candidates)).scalars())
            if not ids:
                return []
            lock_until = now + timedelta(seconds=self._hold_seconds)
            await conn.execute(
                update(OUTBOX)
                .where(OUTBOX.c.id.in_(ids))
                .where(or_(OUTBOX.c.locked_until.is_(None), OUTBOX.c.locked_until < now))
                .values(locked_by=token, locked_until=lock_until)
            )
            rows = await conn.execute(select(OUTBOX).where(OUTBOX.c.locked_by == token).order_by(OUTBOX.c.id))
            return [_from_row(row, self._pubsub) for row in rows]

    async def relay_cycle(self) -> None:
        """One cycle of the relay (a background worker): forget what was confirmed, relay what was missed."""
        await self.flush()
        if self._broker.is_up:
            await self.relay_once()
