"""The gauges of a process that runs workers: what its consumers hold unacked and whether each worker runs."""

import asyncio
from collections.abc import Mapping
from functools import partial
from typing import Protocol

from app.core.resources import Resources
from app.services.gauges import Gauges
from app.workers.consumers import ConsumerGroup, unacked


class Watched(Protocol):
    @property
    def consumer_groups(self) -> tuple[ConsumerGroup, ...]: ...

    def report(self) -> str: ...


def process_gauges(resources: Resources, workers: Mapping[str, Watched]) -> Gauges:
    """The collector of a process running `workers` (none: the shared gauges alone)."""
    groups = [group for worker in workers.values() for group in worker.consumer_groups]
    return Gauges(resources, partial(unacked, groups), lambda: {name: w.report() for name, w in workers.items()})


def start_gauges(resources: Resources, workers: Mapping[str, Watched]) -> "asyncio.Task[None]":
    """Collect the gauges every METRICS_INTERVAL_SECONDS until the task is cancelled."""
    gauges = process_gauges(resources, workers)
    return asyncio.create_task(gauges.run(resources.settings.metrics_interval_seconds), name="metrics-gauges")
