"""Background workers: loops that run one cycle every `interval` seconds (the outbox relay, the overdue
republisher, the DLQ janitor, retention, the scheduler, the release of held jobs, the redrives, the metrics
gauges) and back off when their cycles keep failing."""

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from loguru import logger

from app.core.backoff import job_tiers, tier_for_retry
from app.core.breaker import BreakerState
from app.core.database import is_unreachable
from app.core.resources import Resources
from app.core.statuses import WorkerKind, WorkerState
from app.services.fairness import fairness
from app.services.flow import release_throttled
from app.services.job_types import release_held
from app.services.outbox import Outbox
from app.services.scheduling.scheduler import Scheduler
from app.services.upkeep.janitor import DlqJanitor
from app.services.upkeep.overdue import republish_overdue
from app.services.upkeep.redrives import TICK_SECONDS, RedriveRunner
from app.services.upkeep.retention import Retention
from app.stores.redrives import RedriveStore
from app.stores.redrives.advance import Advance
from app.workers.reports import WorkerReport

FAILURES_TO_OPEN = 3

Cycle = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Backoff:
    """After `failures_to_open` failed cycles in a row the loop's breaker opens: it waits `base` seconds,
    doubling after each further failure up to `cap`, until a cycle succeeds (seed 003: 60 s up to 30 min)."""

    base: float = 60
    cap: float = 1800
    failures_to_open: int = FAILURES_TO_OPEN

    def delay(self, failures: int) -> float | None:
        """The wait after `failures` failed cycles in a row; None while the breaker is closed."""
        if failures < self.failures_to_open:
            return None
        # The doubling of the job retries' delay tiers, not a second backoff formula.
        return tier_for_retry(job_tiers(self.base, self.cap), failures - self.failures_to_open + 1).delay


class BackgroundLoop:
    """One background worker: a cycle, then a pause (the interval, or the backoff), until stopped."""

    kind = WorkerKind.BACKGROUND

    def __init__(self, name: str, cycle: Cycle, interval: float, backoff: Backoff, pause_first: bool = False) -> None:
        self.name, self.cycle, self.interval, self.backoff = name, cycle, interval, backoff
        self.pause_first = pause_first
        self.state = WorkerState.STOPPED
        self.cycles = 0
        self.errors = 0
        self.failures = 0  # in a row, since the last cycle that succeeded
        self.last_cycle_ms: float | None = None
        self.next_delay = interval
        self._in_cycle = False
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def breaker(self) -> BreakerState:
        return BreakerState.CLOSED if self.backoff.delay(self.failures) is None else BreakerState.OPEN

    def report(self) -> WorkerReport:
        """Its cycles as the CONTRACT fields: processed counts every cycle, failed those that raised."""
        return WorkerReport(
            self.name,
            self.kind,
            self.state,
            in_flight=int(self._in_cycle),
            processed=self.cycles,
            failed=self.errors,
            last_cycle_duration_ms=self.last_cycle_ms,
            circuit_breaker_state=self.breaker,
            next_delay_seconds=self.next_delay,
        )

    async def start(self) -> None:
        """Run the loop in a task of its own."""
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=self.name)
        self._task.add_done_callback(self._ended)
        self.state = WorkerState.RUNNING

    async def stop(self, grace: float) -> None:
        """No further cycle; one under way gets `grace` seconds to finish, then it is cancelled."""
        if self._task is None:
            return
        self.state = WorkerState.STOPPING
        self._stopping.set()
        _, unfinished = await asyncio.wait({self._task}, timeout=grace)
        for task in unfinished:
            task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        self.state = WorkerState.STOPPED

    def _ended(self, task: "asyncio.Task[None]") -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.state = WorkerState.FAILED
            logger.opt(exception=exc).error("{} ended by an error its loop could not handle", self.name)

    async def _run(self) -> None:
        if self.pause_first:
            await self._pause(self.interval)
        while not self._stopping.is_set():
            await self.run_cycle()
            await self._pause(self.next_delay)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def run_cycle(self) -> None:
        """One cycle, counted and timed; an error is logged and counts towards the backoff."""
        started = time.perf_counter()
        self._in_cycle = True
        try:
            await self.cycle()
        except Exception as exc:  # a loop outlives any one failure
            self._failed(exc)
        else:
            self._succeeded()
        finally:
            self._in_cycle = False
            self.cycles += 1
            self.last_cycle_ms = round((time.perf_counter() - started) * 1000, 3)

    def _succeeded(self) -> None:
        if self.breaker is BreakerState.OPEN:
            logger.info(
                "{} succeeded again after {} failed cycles; every {}s again", self.name, self.failures, self.interval
            )
        self.failures = 0
        self.next_delay = self.interval

    def _failed(self, exc: Exception) -> None:
        self.errors += 1
        self.failures += 1
        level = "WARNING" if is_unreachable(exc) else "ERROR"
        logger.opt(exception=level == "ERROR").log(level, "{}: {}", self.name, exc)
        backoff = self.backoff.delay(self.failures)
        self.next_delay = self.interval if backoff is None else backoff
        if backoff is not None:
            logger.warning("{} failed {} cycles in a row; next one in {}s", self.name, self.failures, backoff)


class RedriveLoop(BackgroundLoop):
    """The redrive runner's loop: its stop gives back the leases it held, so another process takes them at once."""

    def __init__(self, runner: RedriveRunner, backoff: Backoff) -> None:
        super().__init__("redrives", runner.cycle, TICK_SECONDS, backoff)
        self.runner = runner

    async def stop(self, grace: float) -> None:
        await super().stop(grace)
        await self.runner.release()


def redrive_loop(resources: Resources, outbox: Outbox) -> RedriveLoop:
    """The loop that drives the running redrives (services/upkeep/redrives.py)."""
    stores = resources.stores
    advance = Advance(stores.jobs, stores.outbox, resources.names)
    return RedriveLoop(RedriveRunner(RedriveStore(resources.engine), advance, outbox), backoff_of(resources))


def backoff_of(resources: Resources) -> Backoff:
    """The backoff of this deployment's background workers."""
    settings = resources.settings
    return Backoff(settings.background_backoff_base_seconds, settings.background_backoff_max_seconds)


def background_loops(resources: Resources, outbox: Outbox) -> list[BackgroundLoop]:
    """The loops every process runs beside its workers."""
    settings, names, backoff = resources.settings, resources.names, backoff_of(resources)
    janitor = DlqJanitor(resources.engine, resources.broker, names.jobs_dlq, names.webhooks_dlq)
    scheduler = [
        BackgroundLoop("scheduler", Scheduler(resources, outbox).cycle, settings.scheduler_interval_seconds, backoff)
    ]
    release = partial(_release_waiting, resources, outbox)
    return [
        BackgroundLoop("outbox_relay", outbox.relay_cycle, settings.outbox_relay_interval, backoff),
        BackgroundLoop(
            "overdue_republisher", partial(_republish_overdue, resources), settings.outbox_relay_interval, backoff
        ),
        BackgroundLoop("dlq_janitor", janitor.cycle, settings.dlq_janitor_interval_seconds, backoff, pause_first=True),
        BackgroundLoop(
            "retention", Retention.from_settings(resources).cycle, settings.retention_interval_seconds, backoff
        ),
        *(scheduler if settings.scheduler_enabled else []),
        BackgroundLoop("held_release", release, settings.pause_refresh_seconds, backoff),
        redrive_loop(resources, outbox),
    ]


async def _release_waiting(resources: Resources, outbox: Outbox) -> None:
    """Held jobs whose reason has passed sent to their lanes: a resumed type's, throttled ones, and those waiting
    their client's turn whose share has room."""
    stores = resources.stores
    await release_held(stores.jobs, stores.job_types, outbox)
    await release_throttled(stores.flow, outbox)
    await fairness(resources, outbox).release(None)


async def _republish_overdue(resources: Resources) -> None:
    if resources.broker.is_up:
        await republish_overdue(resources)
