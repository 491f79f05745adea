"""Workers across processes: listed from their heartbeats, stopped and started through the control exchange."""

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from app.core.names import Lane
from app.core.recent_logs import process_name
from app.core.statuses import Action, WorkerKind, WorkerState
from app.main import create_app
from app.runtime import Runtime, add_steering
from app.services.worker_directory import Command
from app.workers.heartbeat import Rates
from app.workers.reports import WorkerReport
from tests.conftest import ADMIN_KEY, NS, REDIS_URL, make_settings, settings_env
from tests.support import Api, BrokerProbe, Process, api_with, app_process, trail, until_status, wait_for

BEAT = {"worker_heartbeat_seconds": 0.5}  # a process drops out 1.5 s after its last beat
LANES = {"job_consumers_default": 1, "job_consumers_critical": 0, "job_consumers_bulk": 0}


@pytest.fixture(autouse=True)
async def forget_stops() -> AsyncIterator[None]:
    """A stop outlives the processes by design: leave none behind for the tests that follow."""
    yield
    redis = Redis.from_url(REDIS_URL)
    await redis.delete(f"{NS}:worker_desired")
    await redis.aclose()


@pytest.fixture
async def fast_api() -> AsyncIterator[Api]:
    async with api_with(create_app(make_settings(**BEAT)), ADMIN_KEY) as running:
        yield running


def name_of(process: Process) -> str:
    return f"{socket.gethostname()}:{process.popen.pid}"


async def entries(api: Api, worker: str) -> dict[str, dict[str, Any]]:
    """The entries of `worker` by process."""
    answer = await api.client.get(f"/api/v1/workers/{worker}", headers=api.admin)
    assert answer.status_code == 200, answer.text
    return {entry["process"]: entry for entry in answer.json()["items"]}


async def states(api: Api, worker: str, *processes: Process) -> list[str | None]:
    found = await entries(api, worker)
    return [found.get(name_of(process), {}).get("state") for process in processes]


async def until_states(api: Api, worker: str, wanted: list[str | None], *processes: Process) -> None:
    async def reached() -> bool:
        return await states(api, worker, *processes) == wanted

    await wait_for(reached, within=20)


async def command(api: Api, worker: str, action: str) -> None:
    answer = await api.client.post(f"/api/v1/workers/{worker}/{action}", headers=api.admin)
    assert answer.status_code == 202, answer.text
    assert answer.json() == {"name": worker, "action": action}


async def test_two_worker_processes_are_listed_stopped_restarted_stopped_and_started(
    fast_api: Api, broker: BrokerProbe, tmp_path: Path
) -> None:
    api, lane = fast_api, broker.topology.names.lane_queue(Lane.DEFAULT)
    env = settings_env(make_settings(**BEAT, **LANES, metrics_port=0))
    headers = await api.new_client("workers-api")
    with (
        app_process(["worker", "jobs"], env, tmp_path / "a.log") as first,
        app_process(["worker", "jobs"], env, tmp_path / "b.log") as second,
    ):
        await until_states(api, "job_worker", ["running", "running"], first, second)
        listed = (await api.client.get("/api/v1/workers", headers=api.admin)).json()["items"]
        mine = {(entry["process"], entry["name"]) for entry in listed}
        for process in (first, second):
            assert {(name_of(process), "job_worker"), (name_of(process), "outbox_relay")} <= mine
        job_worker = (await entries(api, "job_worker"))[name_of(first)]
        assert job_worker["kind"] == "job" and job_worker["consumers"] == 1 and job_worker["last_heartbeat"]
        assert {"processing_rate", "error_rate", "in_flight", "circuit_breaker_state"} <= set(job_worker)

        await command(api, "job_worker", "stop")
        await until_states(api, "job_worker", ["stopped", "stopped"], first, second)
        assert await broker.consumers(lane) == 0
        assert await states(api, "outbox_relay", first, second) == ["running", "running"]  # only that worker
        job = (await api.submit(headers, payload={"n": 7})).json()
        await until_status(api, headers, job["id"], 20, "queued")
        assert await broker.depth(lane) == 1 and await broker.consumers(lane) == 0  # in the lane; nobody takes it

        await asyncio.to_thread(second.kill)
        await until_states(api, "outbox_relay", ["running", None], first, second)  # its TTL passed
        with app_process(["worker", "jobs"], env, tmp_path / "b2.log") as restarted:
            await until_states(api, "outbox_relay", ["running"], restarted)
            assert await states(api, "job_worker", restarted) == ["stopped"], restarted.output()
            assert (await entries(api, "job_worker"))[name_of(restarted)]["consumers"] == 0
            assert await broker.depth(lane) == 1 and await broker.consumers(lane) == 0
            assert (await api.job(headers, job["id"]))["status"] == "queued"

            await command(api, "job_worker", "start")
            await until_states(api, "job_worker", ["running", "running"], first, restarted)
            assert (await until_status(api, headers, job["id"]))["status"] == "succeeded"
            await wait_for(lambda: _consumers_are(broker, lane, 2))
            for process in (first, restarted):  # a process that stops takes itself out at once
                assert await asyncio.to_thread(process.terminate) == 0, process.output()
            assert await states(api, "outbox_relay", first, restarted) == [None, None]


async def test_a_job_cancelled_while_its_worker_is_stopped_never_runs(
    fast_api: Api, broker: BrokerProbe, tmp_path: Path
) -> None:
    api, lane = fast_api, broker.topology.names.lane_queue(Lane.DEFAULT)
    await broker.purge(lane)
    env = settings_env(make_settings(**BEAT, **LANES, metrics_port=0))
    headers = await api.new_client("workers-cancel")
    with app_process(["worker", "jobs"], env, tmp_path / "worker.log") as worker:
        await until_states(api, "job_worker", ["running"], worker)
        await command(api, "job_worker", "stop")
        await until_states(api, "job_worker", ["stopped"], worker)
        kept, cancelled = [(await api.submit(headers, payload={"n": n})).json()["id"] for n in range(2)]
        for job_id in (kept, cancelled):
            await until_status(api, headers, job_id, 20, "queued")
        answer = await api.client.post(f"/api/v1/jobs/{cancelled}/cancel", headers=headers)
        assert (answer.status_code, answer.json()["status"]) == (200, "cancelled"), answer.text

        await command(api, "job_worker", "start")
        await until_states(api, "job_worker", ["running"], worker)
        assert (await until_status(api, headers, kept))["status"] == "succeeded"
        await wait_for(lambda: _lane_drained(broker, lane))  # the cancelled job's message was taken and dropped
    assert (await api.job(headers, cancelled))["status"] == "cancelled"
    assert "running" not in [event["event"] for event in await trail(api, headers, cancelled)]


async def _lane_drained(broker: BrokerProbe, queue: str) -> bool:
    return await broker.depth(queue) == 0


async def _consumers_are(broker: BrokerProbe, queue: str, count: int) -> bool:
    return await broker.consumers(queue) == count


async def test_an_embedded_worker_stopped_reads_stopped_in_ready_and_the_api_still_serves() -> None:
    # Beats far apart: the stop and start can only come over the control exchange, not from a heartbeat's re-read.
    settings = make_settings(worker_heartbeat_seconds=60, embedded_workers=True)
    async with api_with(create_app(settings), ADMIN_KEY) as api:

        async def ready_shows(state: str) -> bool:
            answer = (await api.client.get("/ready")).json()
            return answer["components"]["webhook_worker"] == state and answer["status"] == "ok"

        await wait_for(lambda: ready_shows("running"))
        await command(api, "webhook_worker", "stop")
        await wait_for(lambda: ready_shows("stopped"))
        assert (await api.client.get("/ready")).status_code == 200
        await command(api, "webhook_worker", "start")
        await wait_for(lambda: ready_shows("running"))


async def test_the_workers_calls_are_for_admins_only(api: Api) -> None:
    client = await api.new_client("workers-not-admin")
    calls = [("GET", "/api/v1/workers"), ("GET", "/api/v1/workers/job_worker")]
    calls += [("POST", "/api/v1/workers/job_worker/stop"), ("POST", "/api/v1/workers/job_worker/start")]
    for method, path in calls:
        assert (await api.client.request(method, path, headers=client)).status_code == 403
        assert (await api.client.request(method, path)).status_code == 401


async def test_an_unknown_worker_name_is_a_404_and_a_known_one_not_running_is_empty(api: Api) -> None:
    for method, path in [("GET", ""), ("POST", "/stop"), ("POST", "/start")]:
        answer = await api.client.request(method, f"/api/v1/workers/no_such_worker{path}", headers=api.admin)
        assert answer.status_code == 404, answer.text
    # This API process runs no job worker (not embedded), but the service can run one: known, no entry of ours.
    answer = await api.client.get("/api/v1/workers/job_worker", headers=api.admin)
    assert answer.status_code == 200
    assert process_name() not in {entry["process"] for entry in answer.json()["items"]}
    assert process_name() in {entry["process"] for entry in (await entries(api, "outbox_relay")).values()}


class CountingWorker:
    """A worker that only counts its starts and stops."""

    name, kind = "counting_worker", WorkerKind.BACKGROUND

    def __init__(self) -> None:
        self.starts = self.stops = 0

    def report(self) -> WorkerReport:
        return WorkerReport(
            self.name, self.kind, WorkerState.RUNNING if self.starts > self.stops else WorkerState.STOPPED
        )

    async def start(self) -> None:
        self.starts += 1

    async def stop(self, grace: float) -> None:
        self.stops += 1


async def test_a_process_never_starts_a_worker_an_operator_stopped_until_it_is_started() -> None:
    redis = Redis.from_url(REDIS_URL)
    await redis.hset(f"{NS}:worker_desired", CountingWorker.name, "stop")
    await redis.aclose()
    async with Runtime.opened(make_settings(worker_heartbeat_seconds=60), role="test-control") as runtime:
        control = add_steering(runtime)
        worker = runtime.add(CountingWorker())
        await runtime.start()
        assert (worker.starts, runtime.held) == (0, {CountingWorker.name})
        await control.apply(Command(CountingWorker.name, Action.START))
        assert (worker.starts, worker.stops, runtime.held) == (1, 0, set())
        await control.apply(Command(CountingWorker.name, Action.STOP))
        assert (worker.starts, worker.stops) == (1, 1)
    assert worker.stops == 1  # a stopped worker is not stopped again at shutdown


def test_rates_are_worked_out_over_the_last_minute() -> None:
    rates = Rates(interval=2)

    def report(processed: int, failed: int) -> WorkerReport:
        return WorkerReport("job_worker", WorkerKind.JOB, WorkerState.RUNNING, processed=processed, failed=failed)

    assert rates.add(report(100, 0), now=1000.0) == (0.0, 0.0)
    assert rates.add(report(120, 1), now=1010.0) == (2.0, 0.05)
    # Samples older than a minute are forgotten: the rate is the last minute's alone.
    assert rates.add(report(130, 1), now=1065.0) == (round(10 / 55, 3), 0.0)


async def test_ready_reports_the_workers_other_processes_run(fast_api: Api, tmp_path: Path) -> None:
    """An API process without embedded workers reads /ready's job_worker and webhook_worker from every process's
    heartbeat: running while any process runs one, stopped when stopped everywhere, disabled when none runs."""
    api = fast_api
    env = settings_env(make_settings(**BEAT, **LANES, metrics_port=0))

    async def ready_is(job_worker: str, webhook_worker: str = "disabled") -> bool:
        answer = await api.client.get("/ready")
        components = answer.json()["components"]
        wanted = answer.status_code == 200
        return wanted and (components["job_worker"], components["webhook_worker"]) == (job_worker, webhook_worker)

    await wait_for(lambda: ready_is("disabled"), within=30)
    with app_process(["worker", "jobs"], env, tmp_path / "w.log") as worker:
        await wait_for(lambda: ready_is("running"), within=30)
        await command(api, "job_worker", "stop")
        await wait_for(lambda: ready_is("stopped"))  # stopped on purpose: the API still serves (200)
        await command(api, "job_worker", "start")
        await wait_for(lambda: ready_is("running"))
        assert await asyncio.to_thread(worker.terminate) == 0, worker.output()
    await wait_for(lambda: ready_is("disabled"))  # the process took itself out
