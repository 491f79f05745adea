"""Wiring of the outbox and its relay, shared by the API and worker processes."""

import asyncio
from functools import partial
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.resources import Resources
from app.services.janitor import DlqJanitor
from app.services.outbox import Outbox, Pending
from app.services.overdue import republish_overdue
from app.services.retention import Retention
from app.services.transitions import queue_pending


def make_outbox(resources: Resources) -> Outbox:
    """The outbox with its relay settings; a publish must time out before the relay may take its row."""
    settings = resources.settings
    relay_after = max(settings.outbox_relay_after, settings.publish_timeout_seconds + 1)
    pubsub = frozenset({resources.names.events_exchange})
    outbox = Outbox(resources.engine, resources.broker, relay_after, settings.outbox_batch_size, pubsub)
    outbox.after_job_publish = partial(_mark_queued, resources)
    return outbox


async def _mark_queued(resources: Resources, conn: AsyncConnection, job_ids: list[str]) -> list[Pending]:
    return [staged for _, staged in await queue_pending(conn, resources.names, job_ids)]


def start_background(resources: Resources, outbox: Outbox) -> "asyncio.Task[None]":
    """The background tasks every process runs: the relay (unsent outbox rows, overdue retries) and retention."""
    settings = resources.settings
    extra = partial(republish_overdue, resources)
    relay = asyncio.create_task(outbox.run(settings.outbox_relay_interval, extra), name="outbox-relay")
    retention = Retention.from_settings(resources)
    sweeper = asyncio.create_task(retention.run(settings.retention_interval_seconds), name="retention")
    names = resources.names
    janitor = DlqJanitor(resources.engine, resources.broker, names.jobs_dlq, names.webhooks_dlq)
    cleaner = asyncio.create_task(janitor.run(settings.dlq_janitor_interval_seconds), name="dlq-janitor")
    return asyncio.create_task(_together(relay, sweeper, cleaner), name="background")


async def _together(*tasks: "asyncio.Task[None]") -> None:
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def stop_task(task: "asyncio.Task[Any]") -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
