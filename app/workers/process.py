"""A job-worker process: its own connections, the relay, the consumers, and a graceful stop on SIGTERM."""

import asyncio
from collections.abc import Callable

from loguru import logger

from app.core.config import Settings
from app.core.resources import Resources
from app.services.relay import make_outbox, start_relay, stop_task
from app.workers.job_worker import JobWorker


async def run_job_worker_process(settings: Settings, on_signals: Callable[[asyncio.Event], None]) -> None:
    """Run until signalled; in-flight jobs get the grace period to finish (rule 9)."""
    stop = asyncio.Event()
    on_signals(stop)
    resources = await Resources.open(settings, role="jobs-worker")
    outbox = make_outbox(resources)
    relay = start_relay(resources, outbox)
    worker = JobWorker(resources, outbox)
    await worker.start()
    await stop.wait()
    logger.info("stopping: no new messages; finishing in-flight jobs")
    await worker.stop()
    await stop_task(relay)
    await outbox.flush()
    await resources.close()
    logger.info("job worker stopped")
