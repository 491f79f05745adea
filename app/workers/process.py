"""A worker process: the runtime with its worker, until SIGTERM or SIGINT, then a graceful stop (rule 9)."""

import asyncio
from collections.abc import Callable
from typing import Literal

from loguru import logger

from app.core import tracing
from app.core.config import Settings
from app.runtime import Runtime, add_worker_process
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker


async def run_worker_process(
    settings: Settings, kind: Literal["jobs", "webhooks"], on_signals: Callable[[asyncio.Event], None]
) -> None:
    """Run until signalled; in-flight work gets the grace period to finish."""
    stop = asyncio.Event()
    on_signals(stop)
    tracing.setup(f"{kind}-worker")
    async with Runtime.opened(settings, role=f"{kind}-worker") as runtime:
        if kind == "jobs":
            add_worker_process(runtime, JobWorker)
        else:
            add_worker_process(runtime, WebhookWorker)
        await runtime.start()
        await stop.wait()
        logger.info("stopping: no new messages; finishing in-flight work")
    logger.info("{} worker stopped", kind)
