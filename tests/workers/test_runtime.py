"""The process runtime: parts start in order and stop in reverse, background workers back off and recover, and
every worker reports the CONTRACT.md fields it knows."""

import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.breaker import BreakerState
from app.core.recent_logs import process_name
from app.core.statuses import WorkerKind, WorkerState
from app.runtime import Hooks, Runtime, add_worker_process
from app.workers.background import BackgroundLoop, Backoff
from app.workers.jobs.worker import JobWorker
from app.workers.reports import WorkerReport
from tests.conftest import make_settings
from tests.support import Api, until_status, wait_for

Log = list[tuple[object, ...]]


@dataclass
class Recorder:
    """A tiny worker that notes its start and stop, and whether Redis still answered when it stopped."""

    name: str
    log: Log
    redis: Redis
    kind: WorkerKind = WorkerKind.BACKGROUND
    state: WorkerState = WorkerState.STOPPED

    async def start(self) -> None:
        self.log.append(("start", self.name))
        self.state = WorkerState.RUNNING

    async def stop(self, grace: float) -> None:
        self.log.append(("stop", self.name, grace, await self.redis.ping()))
        self.state = WorkerState.STOPPED

    def report(self) -> WorkerReport:
        return WorkerReport(self.name, self.kind, self.state)


class BrokenStart(Recorder):
    async def start(self) -> None:
        self.log.append(("start", self.name))
        raise RuntimeError("cannot start")


async def test_parts_start_in_order_and_stop_in_reverse_each_with_the_grace() -> None:
    log: Log = []

    async def hook_started() -> None:
        log.append(("start", "hook"))

    async def hook_stopped() -> None:
        log.append(("stop", "hook"))

    async with Runtime.opened(make_settings(), role="test-runtime", grace=0.5) as runtime:
        redis = runtime.resources.redis
        runtime.add(Recorder("first", log, redis))
        runtime.add(Hooks("hook", hook_started, hook_stopped))
        runtime.add(Recorder("last", log, redis))
        with pytest.raises(ValueError, match="registered already"):
            runtime.add(Recorder("first", log, redis))
        await runtime.start()
        assert log == [("start", "first"), ("start", "hook"), ("start", "last")]
        assert list(runtime.workers) == ["first", "last"]  # the hook is a part, not a worker
        assert [(r.name, r.state, r.process) for r in runtime.reports()] == [
            ("first", WorkerState.RUNNING, process_name()),
            ("last", WorkerState.RUNNING, process_name()),
        ]
    # Stopped last to first, each with the grace, while the resources were still open.
    assert log[3:] == [("stop", "last", 0.5, True), ("stop", "hook"), ("stop", "first", 0.5, True)]


async def test_a_part_that_cannot_start_stops_those_started_before_it() -> None:
    log: Log = []
    with pytest.raises(RuntimeError, match="cannot start"):
        async with Runtime.opened(make_settings(), role="test-runtime", grace=0) as runtime:
            redis = runtime.resources.redis
            for part in (
                Recorder("first", log, redis),
                BrokenStart("broken", log, redis),
                Recorder("never", log, redis),
            ):
                runtime.add(part)
            await runtime.start()
    assert log == [("start", "first"), ("start", "broken"), ("stop", "first", 0, True)]


# What every process runs first, in this order: the steering parts, then the background loops.
STEERING_AND_LOOPS = [
    "worker_control",
    "worker_heartbeat",
    "outbox_relay",
    "overdue_republisher",
    "dlq_janitor",
    "retention",
    "scheduler",
    "held_release",
    "redrives",
]


async def test_a_worker_process_starts_its_loops_and_metrics_before_the_worker_so_the_worker_stops_first() -> None:
    async with Runtime.opened(make_settings(), role="test-runtime") as runtime:
        add_worker_process(runtime, JobWorker)
        assert list(runtime.parts) == [
            *STEERING_AND_LOOPS,
            "metrics_server",
            "metrics_gauges",
            "job_worker",
        ]
        assert "metrics_server" not in runtime.workers
        assert [worker.kind for worker in runtime.workers.values()] == [WorkerKind.BACKGROUND] * 8 + [WorkerKind.JOB]


@pytest.fixture
async def missing_table(db: AsyncEngine) -> AsyncIterator[str]:
    """The name of a table that does not exist yet; dropped afterwards if the test made it."""
    name = f"runtime_probe_{uuid.uuid4().hex[:10]}"
    yield name
    async with db.begin() as conn:
        await conn.execute(text(f"DROP TABLE IF EXISTS {name}"))


async def test_a_background_loop_that_keeps_failing_backs_off_and_recovers(db: AsyncEngine, missing_table: str) -> None:
    async def count_rows() -> None:
        async with db.connect() as conn:
            await conn.execute(text(f"SELECT count(*) FROM {missing_table}"))

    interval = 0.05
    loop = BackgroundLoop("probe", count_rows, interval, Backoff(base=0.4, cap=3.2, failures_to_open=3))
    async with Runtime.opened(make_settings(), role="test-runtime", grace=1) as runtime:
        runtime.add(loop)
        await runtime.start()

        async def breaker_open() -> WorkerReport | None:
            report = loop.report()
            return report if report.circuit_breaker_state == BreakerState.OPEN else None

        opened = await wait_for(breaker_open, within=5, interval=0.01)
        assert opened is not None
        assert (opened.state, opened.processed, opened.failed, opened.next_delay_seconds) == ("running", 3, 3, 0.4)
        # Open, the loop waits the backoff, not the interval, before its next cycle; then the wait doubles.
        watched = time.monotonic()

        async def one_more_cycle() -> bool:
            return loop.cycles > opened.processed

        await wait_for(one_more_cycle, within=5, interval=0.01)
        assert time.monotonic() - watched > 5 * interval
        again = loop.report()
        assert (again.circuit_breaker_state, again.failed, again.next_delay_seconds) == ("open", 4, 0.8)

        async with db.begin() as conn:
            await conn.execute(text(f"CREATE TABLE {missing_table} (id integer)"))

        async def breaker_closed() -> WorkerReport | None:
            report = loop.report()
            return report if report.circuit_breaker_state == BreakerState.CLOSED else None

        closed = await wait_for(breaker_closed, within=5, interval=0.01)
        assert closed is not None
        assert (closed.failed, closed.next_delay_seconds) == (4, interval)
        assert closed.last_cycle_duration_ms is not None and closed.last_cycle_duration_ms >= 0

        async def at_the_interval_again() -> bool:
            return loop.cycles >= closed.processed + 5

        await wait_for(at_the_interval_again, within=2, interval=0.01)
        assert loop.errors == 4
    assert loop.state == WorkerState.STOPPED


async def test_the_api_runs_the_background_workers_and_they_report_their_cycles(api: Api) -> None:
    runtime: Runtime = api.app.state.runtime
    assert list(runtime.parts) == [
        *STEERING_AND_LOOPS,
        "live_feed",
        "reply_inbox",
        "job_service",
        "revoked_streams",
        "metrics_gauges",
    ]

    async def relay_cycled() -> bool:
        return runtime.workers["outbox_relay"].report().processed >= 2

    await wait_for(relay_cycled)
    relay = runtime.workers["outbox_relay"].report().as_dict()
    assert relay["kind"] == "background" and relay["state"] == "running" and relay["failed"] == 0
    assert relay["circuit_breaker_state"] == "closed" and relay["last_cycle_duration_ms"] is not None
    assert relay["process"] == process_name()
    fields = {"name", "kind", "process", "state", "consumers", "in_flight", "processed", "failed"}
    assert fields | {"last_cycle_duration_ms", "circuit_breaker_state"} <= set(relay)


async def test_a_job_worker_reports_its_consumers_and_what_it_handled(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("runtime-report")
    job = (await api.submit(headers)).json()
    await until_status(api, headers, job["id"])
    report = worker.report()
    assert (report.name, report.kind, report.state, report.process) == ("job_worker", "job", "running", process_name())
    assert report.consumers == 4 and report.processed >= 1 and report.failed == 0
    assert (report.last_cycle_duration_ms, report.circuit_breaker_state) == (None, "closed")
