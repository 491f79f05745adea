"""One process's lifecycle, the same for the API, a worker process and the tests: open the resources, start the
parts the process runs in the order they were added, stop them in reverse, then close the resources."""

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable
from wsgiref.simple_server import WSGIServer

from loguru import logger

from app.core import metrics
from app.core.config import Settings
from app.core.resources import Resources
from app.core.statuses import WorkerKind
from app.services.outbox import Outbox
from app.services.relay import make_outbox
from app.services.worker_directory import WorkerDirectory
from app.workers.background import BackgroundLoop, background_loops, backoff_of
from app.workers.control import Control
from app.workers.heartbeat import Heartbeat
from app.workers.reports import WorkerReport
from app.workers.watch import Watched, process_gauges


class Part(Protocol):
    """Something a process starts at start-up and stops at shutdown."""

    @property
    def name(self) -> str: ...

    async def start(self) -> None: ...

    async def stop(self, grace: float) -> None: ...


@runtime_checkable
class Worker(Part, Protocol):
    """A part that reports on itself: a job, webhook or background worker."""

    @property
    def kind(self) -> WorkerKind: ...

    def report(self) -> WorkerReport: ...


@runtime_checkable
class StopsRuns(Protocol):
    """A worker that can stop one job's handler (the job worker)."""

    def stop_run(self, job_id: str) -> bool: ...


class ConsumerWorker(Worker, Watched, Protocol):
    """A worker that consumes queues (job, webhook)."""


P = TypeVar("P", bound=Part)
C = TypeVar("C", bound=ConsumerWorker)


@dataclass(frozen=True)
class Hooks:
    """A part given by two functions: what runs beside the workers (the live feed, the reply inbox, …)."""

    name: str
    on_start: Callable[[], Awaitable[None]]
    on_stop: Callable[[], Awaitable[None]]

    async def start(self) -> None:
        await self.on_start()

    async def stop(self, grace: float) -> None:
        await self.on_stop()


async def nothing() -> None:
    """A hook with nothing to do."""


class Runtime:
    """The parts of one process by name; each stop is given the shutdown grace (rule 9)."""

    def __init__(self, resources: Resources, outbox: Outbox, grace: float) -> None:
        self.resources, self.outbox, self.grace = resources, outbox, grace
        self.parts: dict[str, Part] = {}
        self.held: set[str] = set()  # workers an operator stopped: not started until resumed
        self._started: list[Part] = []
        self._stopping = False
        self._closed = False

    @classmethod
    @asynccontextmanager
    async def opened(cls, settings: Settings, role: str, grace: float | None = None) -> AsyncIterator["Runtime"]:
        """The resources for the block; leaving it stops every started part and closes them."""
        resources = await Resources.open(settings, role=role)
        runtime = cls(resources, make_outbox(resources), settings.shutdown_grace_seconds if grace is None else grace)
        try:
            yield runtime
        finally:
            await runtime.stop()

    def add(self, part: P) -> P:
        """Register `part` under its name; it starts after every part added before it."""
        if part.name in self.parts:
            raise ValueError(f"a part named {part.name!r} is registered already")
        self.parts[part.name] = part
        return part

    @property
    def workers(self) -> dict[str, Worker]:
        """The parts that are workers, by name, in start order."""
        return {name: part for name, part in self.parts.items() if isinstance(part, Worker)}

    def reports(self) -> list[WorkerReport]:
        """What each worker of this process says about itself."""
        return [worker.report() for worker in self.workers.values()]

    def worker_names(self) -> list[str]:
        return list(self.workers)

    def _is_started(self, part: Part) -> bool:
        return any(started is part for started in self._started)

    async def start(self) -> None:
        """Start, in order, every part not started yet, but for the workers an operator stopped."""
        for part in self.parts.values():
            if not self._is_started(part) and part.name not in self.held:
                await part.start()
                self._started.append(part)

    async def halt(self, name: str) -> None:
        """Stop the worker `name` until resumed (its stop lets in-flight work finish within the grace)."""
        self.held.add(name)
        part = self.parts[name]
        if self._is_started(part):
            self._started = [started for started in self._started if started is not part]
            await part.stop(self.grace)

    async def resume(self, name: str) -> None:
        """Start the worker `name` again, in its place in the stop order; not while the process stops."""
        self.held.discard(name)
        part = self.parts[name]
        if self._stopping or self._is_started(part):
            return
        await part.start()
        self._started.append(part)
        order = list(self.parts)
        self._started.sort(key=lambda started: order.index(started.name))

    def stop_runs(self, job_ids: Iterable[str]) -> None:
        """Stop the handlers of these jobs wherever this process runs them (their cancel was asked for)."""
        for worker in self.workers.values():
            if isinstance(worker, StopsRuns):
                for job_id in job_ids:
                    worker.stop_run(job_id)

    async def stop(self) -> None:
        """Stop the started parts in reverse order, then the outbox and the resources; once."""
        self._stopping = True
        while self._started:
            part = self._started.pop()
            try:
                await part.stop(self.grace)
            except Exception:  # the parts before it, and the resources, still get their stop
                logger.exception("{} did not stop cleanly", part.name)
        if not self._closed:
            self._closed = True
            await self.outbox.close()
            await self.resources.close()


@dataclass
class MetricsServer:
    """/metrics on METRICS_PORT, for a worker process; a port already taken costs the metrics, not the worker."""

    settings: Settings
    name: str = "metrics_server"
    server: WSGIServer | None = None

    async def start(self) -> None:
        host, port = self.settings.host, self.settings.metrics_port
        try:
            self.server = metrics.serve(port, host)
        except OSError as exc:
            logger.error("cannot serve metrics on {}:{}: {}", host, port, exc)
            return
        if self.server is not None:
            logger.info("metrics on http://{}:{}/metrics", host, port)

    async def stop(self, grace: float) -> None:
        metrics.stop_serving(self.server)
        self.server = None


def add_steering(runtime: Runtime) -> Control:
    """The worker control and the heartbeat, added before the workers: the control's start reads which workers an
    operator stopped (they stay down), and both stop after the workers."""
    resources = runtime.resources
    directory = WorkerDirectory(resources.redis, resources.names, resources.settings.worker_heartbeat_seconds)
    control = runtime.add(Control(resources.broker, resources.names, directory, runtime))
    runtime.add(Heartbeat(directory, runtime.reports, control.reconcile))
    return control


def add_background(runtime: Runtime) -> None:
    """The background workers every process runs: outbox relay, overdue republisher, DLQ janitor, retention."""
    for loop in background_loops(runtime.resources, runtime.outbox):
        runtime.add(loop)


def add_gauges(runtime: Runtime, workers: Mapping[str, Watched]) -> None:
    """The metrics gauges as a background worker, reading what `workers` hold; add it before them, so it stops
    after they have finished."""
    resources = runtime.resources
    gauges = process_gauges(resources, workers)
    interval = resources.settings.metrics_interval_seconds
    runtime.add(BackgroundLoop("metrics_gauges", gauges.collect, interval, backoff_of(resources)))


def add_worker_process(
    runtime: Runtime, make: Callable[[Resources, Outbox], C], background: bool = True, observed: bool = True
) -> C:
    """What `python -m app worker …` runs: the control and heartbeat, the background workers, the metrics (gauges
    and METRICS_PORT), then the worker, which stops first. A test's worker leaves out the metrics and may leave out
    the loops."""
    worker = make(runtime.resources, runtime.outbox)
    add_steering(runtime)
    if background:
        add_background(runtime)
    if observed:
        runtime.add(MetricsServer(runtime.resources.settings))
        add_gauges(runtime, {worker.name: worker})
    return runtime.add(worker)
