"""The gauges of a process that runs workers: what its consumers hold unacked and whether each worker runs."""

from collections.abc import Mapping
from functools import partial
from typing import Protocol

from app.core.resources import Resources
from app.core.statuses import WorkerState
from app.services.upkeep.gauges import Gauges
from app.workers.consumers import ConsumerGroup, unacked


class Watched(Protocol):
    @property
    def consumer_groups(self) -> tuple[ConsumerGroup, ...]: ...

    @property
    def state(self) -> WorkerState: ...


def process_gauges(resources: Resources, workers: Mapping[str, Watched]) -> Gauges:
    """The collector of a process running `workers` (none: the shared gauges alone)."""
    groups = [group for worker in workers.values() for group in worker.consumer_groups]
    return Gauges(resources, partial(unacked, groups), lambda: {name: w.state for name, w in workers.items()})
