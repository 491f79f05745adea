"""Two API processes on one database, Redis and broker: idempotency, rate limits, circuits and worker control hold
across them, because each lives in the database or Redis, not in a process."""

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.models.tables import JOBS
from tests.api.test_workers_api import BEAT, LANES, command, until_states
from tests.conftest import ADMIN_KEY, NS, REDIS_URL, make_settings, settings_env
from tests.support import Api, Process, app_process, free_port, until_serving

pytestmark = pytest.mark.slow  # two API processes start for the module

RATE = 10  # submissions per client per minute, shared by both processes


@pytest.fixture(scope="module")
def api_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[int, Process]]]:
    logs = tmp_path_factory.mktemp("two-apis")
    ports = [free_port(), free_port()]
    with (
        app_process(["api"], _env(ports[0]), logs / "a.log") as first,
        app_process(["api"], _env(ports[1]), logs / "b.log") as second,
    ):
        yield [(ports[0], first), (ports[1], second)]


def _env(port: int) -> dict[str, str]:
    return settings_env(make_settings(port=port, rate_limit_per_minute=RATE, metrics_port=0, **BEAT))


@pytest.fixture
async def apis(api_processes: list[tuple[int, Process]]) -> AsyncIterator[list[Api]]:
    clients = [httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) for port, _ in api_processes]
    try:
        for client, (_, process) in zip(clients, api_processes, strict=True):
            try:
                await until_serving(client, within=60)
            except AssertionError as exc:
                raise AssertionError(process.output()[-3000:]) from exc
        yield [Api(None, client, ADMIN_KEY) for client in clients]  # type: ignore[arg-type]
    finally:
        for client in clients:
            await client.aclose()


async def test_one_idempotency_key_sent_to_both_processes_at_once_makes_one_job(
    apis: list[Api], db: AsyncEngine
) -> None:
    headers = {**await apis[0].new_client("two-apis-idem"), "Idempotency-Key": "same-key"}
    answers = await asyncio.gather(*(api.submit(headers, payload={"n": 1}) for api in apis))
    assert sorted(a.status_code for a in answers) in ([200, 201], [200, 202], [201, 201], [201, 202], [202, 202])
    assert len({a.json()["id"] for a in answers}) == 1, [a.text for a in answers]
    async with db.connect() as conn:
        count = (await conn.execute(select(func.count()).where(JOBS.c.client_id == "two-apis-idem"))).scalar_one()
    assert count == 1


async def test_the_rate_limit_counts_a_clients_submissions_through_both_processes(apis: list[Api]) -> None:
    headers = await apis[0].new_client("two-apis-rate")
    statuses = [(await apis[n % 2].submit(headers, payload={"n": n})).status_code for n in range(RATE + 6)]
    assert sum(status in (201, 202) for status in statuses) == RATE
    assert statuses[RATE:] == [429] * 6


async def test_a_circuit_opened_in_redis_refuses_that_job_type_in_both_processes(apis: list[Api]) -> None:
    headers = await apis[0].new_client("two-apis-circuit")
    redis = Redis.from_url(REDIS_URL)
    breaker = Names(NS).job_breaker_key("sleep")
    await redis.hset(breaker, mapping={"opened_at": time.time(), "window_start": time.time()})
    try:
        for api in apis:
            refused = await api.submit(headers, job_type="sleep", payload={"seconds": 0.1})
            assert (refused.status_code, refused.json()["code"]) == (503, "circuit_open")
    finally:
        await redis.delete(breaker)
        await redis.aclose()
    for api in apis:  # closed again, in both
        assert (await api.submit(headers, job_type="sleep", payload={"seconds": 0.1})).status_code in (201, 202)


async def test_a_worker_stopped_through_one_process_is_seen_stopped_through_the_other_and_started_back(
    apis: list[Api], tmp_path: Path
) -> None:
    env = settings_env(make_settings(**BEAT, **LANES, metrics_port=0))
    redis = Redis.from_url(REDIS_URL)
    try:
        with app_process(["worker", "jobs"], env, tmp_path / "w.log") as worker:
            await until_states(apis[1], "job_worker", ["running"], worker)
            await command(apis[0], "job_worker", "stop")
            await until_states(apis[1], "job_worker", ["stopped"], worker)
            await command(apis[1], "job_worker", "start")
            await until_states(apis[0], "job_worker", ["running"], worker)
            assert await asyncio.to_thread(worker.terminate) == 0, worker.output()
    finally:  # a stop outlives the processes by design: leave none behind
        await redis.delete(Names(NS).worker_desired_key)
        await redis.aclose()


async def test_a_key_revoked_through_one_process_ends_its_streams_on_the_other(apis: list[Api]) -> None:
    created = await apis[0].client.post("/api/v1/api-keys", json={"client_id": "two-apis-sse"}, headers=apis[0].admin)
    headers = {"Authorization": f"Bearer {created.json()['api_key']}"}
    async with apis[1].client.stream("GET", "/api/v1/events/stream", headers=headers) as live:
        assert live.status_code == 200
        answer = await apis[0].client.delete(f"/api/v1/api-keys/{created.json()['id']}", headers=apis[0].admin)
        assert answer.status_code == 204

        async def messages() -> list[str]:
            return [line async for line in live.aiter_lines() if line.startswith("data:")]

        assert await asyncio.wait_for(messages(), 5) == []  # the stream ended, with no event after the revocation
