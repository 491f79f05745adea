"""A worker process: its own connections, the relay, the consumers, and a graceful stop on SIGTERM."""

import asyncio
from collections.abc import Callable
from typing import Literal

from loguru import logger

from app.core.config import Settings
from app.core.resources import Resources
from app.services.relay import make_outbox, start_background, stop_task
from app.workers.job_worker import JobWorker
from app.workers.webhook_worker import WebhookWorker


async def run_worker_process(
    settings: Settings, kind: Literal["jobs", "webhooks"], on_signals: Callable[[asyncio.Event], None]
) -> None:
    """Run until signalled; in-flight work gets the grace period to finish (rule 9)."""
    stop = asyncio.Event()
    on_signals(stop)
    resources = await Resources.open(settings, role=f"{kind}-worker")
    outbox = make_outbox(resources)
    relay = start_background(resources, outbox)
    worker = JobWorker(resources, outbox) if kind == "jobs" else WebhookWorker(resources, outbox)
    await worker.start()
    await stop.wait()
    logger.info("stopping: no new messages; finishing in-flight work")
    await worker.stop()
    await stop_task(relay)
    await outbox.close()
    await resources.close()
    logger.info("{} worker stopped", kind)
