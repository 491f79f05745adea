"""Direct lines to PostgreSQL and RabbitMQ for the orchestrator: counts, timings, depths, re-publishing.

The bench never asks the service for its own figures: drain times and latencies come from the jobs table
(`started_at`, `finished_at`, `created_at`, written by the service's clock) or from the receiver's clock.
"""

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aio_pika
import asyncpg  # type: ignore[import-untyped]
from aio_pika.abc import AbstractChannel, AbstractConnection

from app.core.messages import JobMessage, job_outgoing
from app.core.names import Names


@dataclass
class Db:
    pool: Any

    @classmethod
    async def open(cls, dsn: str) -> "Db":
        return cls(await asyncpg.create_pool(dsn, min_size=1, max_size=2))

    async def close(self) -> None:
        await self.pool.close()

    async def statuses(self) -> dict[str, int]:
        rows = await self.pool.fetch("SELECT status, count(*) AS n FROM jobs GROUP BY status")
        return {row["status"]: row["n"] for row in rows}

    async def succeeded(self, client_id: str | None = None) -> int:
        """Jobs succeeded: all of them, or one client's."""
        if client_id is None:
            return int(await self.pool.fetchval("SELECT count(*) FROM jobs WHERE status = 'succeeded'"))
        query = "SELECT count(*) FROM jobs WHERE status = 'succeeded' AND client_id = $1"
        return int(await self.pool.fetchval(query, client_id))

    async def drain_window(self) -> tuple[datetime, datetime, int]:
        """First start and last finish of the succeeded jobs, and how many there are."""
        row = await self.pool.fetchrow(
            "SELECT min(started_at) AS first, max(finished_at) AS last, count(*) AS n FROM jobs "
            "WHERE status = 'succeeded'"
        )
        return row["first"], row["last"], row["n"]

    async def finished_since(self, since: datetime) -> tuple[int, datetime | None]:
        """How many jobs succeeded at or after `since`, and when the last one did."""
        row = await self.pool.fetchrow(
            "SELECT count(*) AS n, max(finished_at) AS last FROM jobs WHERE status = 'succeeded' AND finished_at >= $1",
            since,
        )
        return int(row["n"]), row["last"]

    async def latencies_ms(self, ids: list[str] | None = None) -> list[float]:
        """finished_at - created_at of succeeded jobs (the service's own clock), in ms."""
        query = "SELECT extract(epoch FROM finished_at - created_at) * 1000 AS ms FROM jobs WHERE status = 'succeeded'"
        rows = await (self.pool.fetch(query + " AND id = ANY($1::text[])", ids) if ids else self.pool.fetch(query))
        return [float(row["ms"]) for row in rows]

    async def unconfirmed(self, status: str) -> int:
        """Outbox rows still holding a `job.<status>` event: 0 once the broker confirmed every one of them."""
        query = "SELECT count(*) FROM outbox WHERE routing_key LIKE '%.' || $1"
        return int(await self.pool.fetchval(query, status))

    async def succeeded_of(self, ids: list[str]) -> int:
        return int(
            await self.pool.fetchval(
                "SELECT count(*) FROM jobs WHERE status = 'succeeded' AND id = ANY($1::text[])", ids
            )
        )

    async def saved_of(self, ids: list[str]) -> int:
        """How many of `ids` the database holds."""
        return int(await self.pool.fetchval("SELECT count(*) FROM jobs WHERE id = ANY($1::text[])", ids))

    async def soak_check(self, ids: list[str]) -> dict[str, int]:
        """Lost: accepted but not succeeded (or missing). Duplicated: ran more than once, or more than one
        `succeeded` audit row. Extra: rows nobody was told about (a submit whose answer never arrived)."""
        row = await self.pool.fetchrow(
            """
            WITH accepted AS (SELECT unnest($1::text[]) AS id)
            SELECT
              (SELECT count(*) FROM accepted a LEFT JOIN jobs j ON j.id = a.id
                 WHERE j.id IS NULL OR j.status <> 'succeeded') AS lost,
              (SELECT count(*) FROM jobs WHERE runs > 1) AS reran,
              (SELECT count(*) FROM (SELECT job_id FROM job_events WHERE event = 'succeeded'
                 GROUP BY job_id HAVING count(*) > 1) twice) AS succeeded_twice,
              (SELECT count(*) FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM accepted a WHERE a.id = j.id)) AS extra,
              (SELECT count(*) FROM jobs) AS total
            """,
            ids,
        )
        return {key: int(row[key]) for key in ("lost", "reran", "succeeded_twice", "extra", "total")}

    async def outbox_rows(self) -> int:
        return int(await self.pool.fetchval("SELECT count(*) FROM outbox"))

    async def outbox_by_key(self) -> dict[str, int]:
        """Outbox rows per routing key, most first: what the relay still has to publish."""
        rows = await self.pool.fetch(
            "SELECT routing_key, count(*) AS n FROM outbox GROUP BY routing_key ORDER BY n DESC LIMIT 5"
        )
        return {row["routing_key"]: row["n"] for row in rows}

    async def delivery_statuses(self, endpoint_id: str) -> dict[str, int]:
        """An endpoint's deliveries by status (pending: in flight or waiting in a delay tier)."""
        rows = await self.pool.fetch(
            "SELECT status, count(*) AS n FROM deliveries WHERE endpoint_id = $1 GROUP BY status", endpoint_id
        )
        return {row["status"]: row["n"] for row in rows}

    async def queued_jobs(self) -> list[dict[str, Any]]:
        rows = await self.pool.fetch("SELECT * FROM jobs WHERE status = 'queued' ORDER BY created_at")
        jobs = []
        for row in rows:
            job = dict(row)
            job["payload"] = json.loads(job["payload"]) if isinstance(job["payload"], str) else job["payload"]
            jobs.append(job)
        return jobs

    async def server_version(self) -> str:
        """The version, with the settings that change what a statement costs here: without autovacuum no table
        is analysed, so a prepared statement's generic plan, made while its table was nearly empty, is kept
        (sequential scans as the table grows); synchronous_commit sets what each commit waits for."""
        rows = await self.pool.fetch(
            "SELECT name, setting FROM pg_settings WHERE name IN ('autovacuum', 'synchronous_commit') ORDER BY name"
        )
        shown = ", ".join(f"{row['name']} {row['setting']}" for row in rows)
        return f"{await self.pool.fetchval('SHOW server_version')} ({shown})"


@dataclass
class Broker:
    """A plain (not robust) connection: a robust channel answers a passive declare from its cache, with stale
    counts. It reconnects by itself when the broker went away (another run may restart RabbitMQ)."""

    url: str
    connection: AbstractConnection | None = None
    channel_: AbstractChannel | None = None

    @classmethod
    async def open(cls, url: str) -> "Broker":
        broker = cls(url)
        await broker.channel()
        return broker

    async def channel(self, within: float = 120) -> AbstractChannel:
        """The confirming channel, reconnecting (for at most `within` seconds) when it is closed."""
        if self.channel_ is not None and not self.channel_.is_closed:
            return self.channel_
        deadline = time.monotonic() + within
        while True:
            try:
                if self.connection is None or self.connection.is_closed:
                    self.connection = await aio_pika.connect(self.url)
                self.channel_ = await self.connection.channel(publisher_confirms=True, on_return_raises=True)
                return self.channel_
            except (OSError, RuntimeError, aio_pika.exceptions.AMQPError):  # RuntimeError: a connection closed under us
                if time.monotonic() > deadline:
                    raise
                self.connection = None
                await asyncio.sleep(1)

    async def close(self) -> None:
        if self.connection is not None and not self.connection.is_closed:
            await self.connection.close()

    async def depth_and_consumers(self, queue: str) -> tuple[int, int]:
        for _ in range(2):
            channel = await self.channel()
            try:
                declared = await channel.declare_queue(queue, passive=True)
            except (aio_pika.exceptions.ChannelInvalidStateError, aio_pika.exceptions.AMQPConnectionError):
                self.channel_ = None  # the broker went away under us: reconnect and ask again
                continue
            result = declared.declaration_result
            return result.message_count or 0, result.consumer_count or 0
        raise RuntimeError(f"RabbitMQ did not answer a passive declare of {queue}")

    async def move(self, source: str, target: str, create: bool = False) -> int:
        """Move every message now in the queue `source` into the queue `target` (through the default exchange,
        persistent and confirmed, with its body, headers, content type, priority and id: all an event message
        carries); `create`: declare `target` first, a plain durable queue. How many moved."""
        channel = await self.channel()
        if create:
            await channel.declare_queue(target, durable=True)
        queue = await channel.declare_queue(source, passive=True)
        taken = []
        while (message := await queue.get(no_ack=False, fail=False)) is not None:
            taken.append(message)
        copies = [
            aio_pika.Message(
                body=m.body,
                headers=m.headers,
                content_type=m.content_type,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                priority=m.priority,
                message_id=m.message_id,
            )
            for m in taken
        ]
        await asyncio.gather(*(channel.default_exchange.publish(copy, routing_key=target) for copy in copies))
        for message in taken:
            await message.ack()
        return len(taken)

    async def publish_job_messages(self, names: Names, jobs: list[dict[str, Any]], batch: int = 500) -> None:
        """Put each job's message in its lane again, built by the service's own `job_outgoing`, confirmed."""
        exchange = await (await self.channel()).get_exchange(names.jobs_exchange, ensure=False)
        for start in range(0, len(jobs), batch):
            outgoing = [job_outgoing(names, JobMessage.from_row(job)) for job in jobs[start : start + batch]]
            confirms = [
                exchange.publish(
                    aio_pika.Message(
                        body=o.body,
                        headers=o.headers,
                        content_type="application/json",
                        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                        priority=o.priority,
                        message_id=o.message_id,
                    ),
                    o.routing_key,
                    mandatory=True,
                    timeout=30,
                )
                for o in outgoing
            ]
            await asyncio.gather(*confirms)
