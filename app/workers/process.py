"""A worker process: its own connections, the relay, the consumers, and a graceful stop on SIGTERM."""

import asyncio
from collections.abc import Callable
from typing import Literal
from wsgiref.simple_server import WSGIServer

from loguru import logger

from app.core import metrics
from app.core.config import Settings
from app.core.resources import Resources
from app.services.relay import make_outbox, start_background, stop_task
from app.workers.job_worker import JobWorker
from app.workers.watch import start_gauges
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
    gauges = start_gauges(resources, {worker.name: worker})
    server = _serve_metrics(settings)
    await stop.wait()
    logger.info("stopping: no new messages; finishing in-flight work")
    await worker.stop()
    await stop_task(gauges)
    metrics.stop_serving(server)
    await stop_task(relay)
    await outbox.close()
    await resources.close()
    logger.info("{} worker stopped", kind)


def _serve_metrics(settings: Settings) -> WSGIServer | None:
    """/metrics on METRICS_PORT; a port already taken costs the metrics, not the worker."""
    try:
        server = metrics.serve(settings.metrics_port, settings.host)
    except OSError as exc:
        logger.error("cannot serve metrics on {}:{}: {}", settings.host, settings.metrics_port, exc)
        return None
    if server is not None:
        logger.info("metrics on http://{}:{}/metrics", settings.host, settings.metrics_port)
    return server
