"""The gauges that need I/O (queue depths, the outbox, circuits) and the workers' heartbeats, collected by one
background loop every few seconds, each reading bounded by a timeout: never on a request's or a message's path."""

import asyncio
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aio_pika
from loguru import logger
from sqlalchemy import func, select

from app.core import metrics
from app.core.resources import Resources
from app.core.statuses import HeldReason, JobStatus, WorkerState
from app.models.tables import JOBS, OUTBOX
from app.models.types import utcnow
from app.schemas.payloads.registry import PAYLOADS
from app.services.job_type_breakers import job_type_breakers
from app.stores.jobs.holds import HELD_NOW

READ_TIMEOUT = 5.0
SCAN_COUNT = 1000


class BrokerUnavailable(Exception):
    """The broker is down or refused the passive declares, so no depth can be read."""


@dataclass(frozen=True)
class QueueDepth:
    """One queue, named without the namespace: its ready messages and its consumers."""

    queue: str
    ready: int
    consumers: int


async def queue_depths(resources: Resources) -> list[QueueDepth]:
    """Every queue's depth by a passive declare (no management plugin needed)."""
    broker, prefix = resources.broker, f"{resources.names.ns}."
    if not broker.is_up:
        raise BrokerUnavailable("the broker is not connected")
    channel = await broker.connection.channel()
    try:
        depths = []
        for spec in resources.topology.queues:
            result = (await channel.declare_queue(spec.name, passive=True)).declaration_result
            depths.append(
                QueueDepth(spec.name.removeprefix(prefix), result.message_count or 0, result.consumer_count or 0)
            )
        return depths
    except aio_pika.exceptions.AMQPError as exc:
        raise BrokerUnavailable(repr(exc)) from exc
    finally:
        if not channel.is_closed:
            await channel.close()


Unacked = Callable[[], dict[str, int]]  # queue name -> messages this process holds unacked
States = Callable[[], dict[str, str]]  # worker name -> its state


def _nothing_unacked() -> dict[str, int]:
    return {}


def _no_workers() -> dict[str, str]:
    return {}


@dataclass
class Gauges:
    """One process's collector; `unacked` and `workers` report what this process itself runs."""

    resources: Resources
    unacked: Unacked = _nothing_unacked
    workers: States = _no_workers
    process_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")

    def __post_init__(self) -> None:
        self.breakers = job_type_breakers(self.resources)
        self.prefix = f"{self.resources.names.ns}."

    async def collect(self) -> None:
        """Every gauge once; a reading that fails or times out leaves its gauges as they were."""
        self.heartbeats()
        readings = (
            self.queues(),
            self.outbox(),
            self.job_circuits(),
            self.endpoint_circuits(),
            self.scheduled(),
            self.held(),
        )
        results = await asyncio.gather(*(asyncio.wait_for(r, READ_TIMEOUT) for r in readings), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                logger.debug("a metrics reading failed: {!r}", result)

    def heartbeats(self) -> None:
        now = time.time()
        for name, state in self.workers().items():
            if state == WorkerState.RUNNING:
                metrics.WORKER_HEARTBEAT.labels(f"{self.process_id}:{name}").set(now)

    def label(self, queue: str) -> str:
        """A queue's name without the namespace, so dashboards and rules read the same in every deployment."""
        return queue.removeprefix(self.prefix)

    async def queues(self) -> None:
        """Ready messages and consumers from the broker; unacked from this process."""
        held = self.unacked()
        for spec in self.resources.topology.queues:
            metrics.QUEUE_MESSAGES.labels(self.label(spec.name), "unacked").set(held.get(spec.name, 0))
        try:
            depths = await queue_depths(self.resources)
        except BrokerUnavailable as exc:
            logger.debug("queue depths unavailable: {!r}", exc)
            return
        for depth in depths:
            metrics.QUEUE_MESSAGES.labels(depth.queue, "ready").set(depth.ready)
            metrics.QUEUE_CONSUMERS.labels(depth.queue).set(depth.consumers)

    async def outbox(self) -> None:
        async with self.resources.engine.connect() as conn:
            count, oldest = (await conn.execute(select(func.count(), func.min(OUTBOX.c.created_at)))).one()
        metrics.OUTBOX_BACKLOG.set(count)
        metrics.OUTBOX_OLDEST_AGE.set(max(0.0, (utcnow() - oldest).total_seconds()) if oldest else 0.0)

    async def scheduled(self) -> None:
        """Jobs waiting for their time, and how late the most overdue job or active schedule is."""
        waiting = select(func.count(), func.min(JOBS.c.next_attempt_at)).where(JOBS.c.status == JobStatus.SCHEDULED)
        async with self.resources.engine.connect() as conn:
            count, earliest_job = (await conn.execute(waiting)).one()
        earliest_firing = await self.resources.stores.schedules.earliest_firing()
        metrics.SCHEDULED_WAITING.set(count)
        now = utcnow()
        lags = [(now - due).total_seconds() for due in (earliest_job, earliest_firing) if due is not None]
        metrics.SCHEDULED_OVERDUE.set(max([0.0, *lags]))

    async def held(self) -> None:
        """Jobs held back in the database, by reason (0 for a reason none is held for)."""
        query = select(JOBS.c.held, func.count()).where(HELD_NOW).group_by(JOBS.c.held)
        async with self.resources.engine.connect() as conn:
            counts = {reason: count for reason, count in (await conn.execute(query)).all()}
        for reason in HeldReason:
            metrics.HELD_JOBS.labels(str(reason)).set(counts.get(str(reason), 0))

    async def job_circuits(self) -> None:
        circuits = await asyncio.gather(*(self.breakers.check(job_type) for job_type in PAYLOADS))
        for circuit in circuits:
            metrics.CIRCUIT_BREAKER_STATE.labels(circuit.job_type).set(metrics.BREAKER_VALUES[circuit.state])

    async def endpoint_circuits(self) -> None:
        """An endpoint's breaker hash exists only while it has failed since its last success; opened_at > 0 is
        an open (or half-open) circuit."""
        redis = self.resources.redis
        pattern = self.resources.names.endpoint_breaker_key("*")
        keys = [key async for key in redis.scan_iter(match=pattern, count=SCAN_COUNT)]
        if not keys:
            metrics.WEBHOOK_CIRCUITS_OPEN.set(0)
            return
        async with redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hget(key, "opened_at")
            opened = await pipe.execute()
        metrics.WEBHOOK_CIRCUITS_OPEN.set(sum(1 for value in opened if value and float(value) > 0))
