"""Admission control: idempotent submits, per-client rate limits, per-job-type circuit breakers, size limits."""

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.main import create_app
from app.models.tables import JOBS
from app.services.job_type_breakers import CHECK_SCRIPT
from app.services.rate_limit import SLIDE_SCRIPT
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.local.private_services import PrivateRedis
from tests.support import Api, api_with, app_process, free_port, redis_stopped, until_status, wait_for


def guarded(settings: Settings) -> contextlib.AbstractAsyncContextManager[Api]:
    return api_with(create_app(settings), ADMIN_KEY)


async def test_a_flood_is_limited_per_client_with_headers() -> None:
    async with guarded(make_settings(rate_limit_per_minute=5)) as api:
        flooder, bystander = await api.new_client("flood-a"), await api.new_client("flood-b")
        answers = [await api.submit(flooder) for _ in range(8)]
        assert [a.status_code for a in answers] == [201] * 5 + [429] * 3
        assert [a.headers["X-RateLimit-Remaining"] for a in answers[:5]] == ["4", "3", "2", "1", "0"]
        assert all(a.headers["X-RateLimit-Limit"] == "5" for a in answers)
        refused = answers[-1]
        assert refused.json()["code"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        assert refused.headers["X-RateLimit-Remaining"] == "0"
        assert 1 <= int(refused.headers["X-RateLimit-Reset"]) <= 60
        assert (await api.submit(bystander)).status_code == 201
        # Bad requests count too: the limit is on submissions, whatever becomes of them.
        assert (await api.client.post("/api/v1/jobs", json={}, headers=bystander)).status_code == 422
        listed = (await api.client.get("/api/v1/jobs", headers=flooder)).json()["items"]
        assert len(listed) == 5


async def test_two_api_processes_racing_on_one_key_create_one_job(db: AsyncEngine, tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    envs = [settings_env(make_settings(port=port, rate_limit_per_minute=10_000)) for port in ports]
    with app_process(["api"], envs[0], logs[0]) as first, app_process(["api"], envs[1], logs[1]) as second:
        async with httpx.AsyncClient(timeout=30) as client:

            async def up(port: int) -> bool:
                try:
                    return (await client.get(f"http://127.0.0.1:{port}/health")).status_code == 200
                except httpx.HTTPError:
                    return False

            for port in ports:
                await wait_for(lambda port=port: up(port), within=30)  # type: ignore[misc]
            admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
            key = (
                await client.post(
                    f"http://127.0.0.1:{ports[0]}/api/v1/api-keys", json={"client_id": "racer"}, headers=admin
                )
            ).json()
            headers = {"Authorization": f"Bearer {key['api_key']}"}
            body = {"job_type": "echo", "payload": {"race": True}}
            answers: list[httpx.Response] = []
            for n in range(10):
                pair = [
                    client.post(
                        f"http://127.0.0.1:{port}/api/v1/jobs",
                        json=body,
                        headers={**headers, "Idempotency-Key": f"race-{n}"},
                    )
                    for port in ports
                ]
                answers += await asyncio.gather(*pair)
        assert first.popen.poll() is None and second.popen.poll() is None
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 10 + [201] * 10, [a.text for a in answers if a.status_code not in (200, 201)]
    for n in range(10):
        pair = answers[2 * n : 2 * n + 2]
        assert pair[0].json()["id"] == pair[1].json()["id"]
    async with db.connect() as conn:
        count = (
            await conn.execute(select(func.count()).select_from(JOBS).where(JOBS.c.client_id == "racer"))
        ).scalar_one()
    assert count == 10


@pytest.mark.slow
async def test_with_redis_down_submits_succeed_idempotency_holds_and_the_limiter_fails_open(
    private_redis: PrivateRedis,
) -> None:
    async with guarded(make_settings(rate_limit_per_minute=3, redis_url=private_redis.url)) as api:
        headers = await api.new_client("no-redis")
        with redis_stopped(private_redis):
            answers = [await api.submit(headers, payload={"n": n}) for n in range(5)]
            first = await api.submit(headers, idempotency_key="k-1")
            again = await api.submit(headers, idempotency_key="k-1")
            other = await api.submit(headers, idempotency_key="k-1", payload={"other": True})
            circuits = await api.client.get("/api/v1/circuits", headers=headers)
            ready = await api.client.get("/ready")
    assert [a.status_code for a in answers] == [201] * 5  # over the limit of 3: the limiter failed open
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
    assert again.json()["id"] == first.json()["id"]
    assert circuits.status_code == 200
    assert ready.status_code == 200 and ready.json()["status"] == "degraded"


async def test_transient_failures_open_the_breaker_then_the_probe_closes_it(tmp_path: Path) -> None:
    settings = make_settings(breaker_min_calls=3, breaker_failure_rate=0.5, breaker_cooldown_seconds=2)
    async with guarded(settings) as api:
        headers = await api.new_client("breaker")
        with app_process(["worker", "jobs"], settings_env(settings), tmp_path / "w.log") as process:
            # Each fails on its first run, then succeeds: three transient failures in a row open the circuit.
            jobs = [
                (await api.submit(headers, job_type="flaky", payload={"fail_times": 1}, max_retries=3)).json()
                for _ in range(3)
            ]

            async def circuit() -> dict[str, Any]:
                rows = (await api.client.get("/api/v1/circuits", headers=headers)).json()
                return next(row for row in rows if row["job_type"] == "flaky")

            async def opened() -> bool:
                return (await circuit())["state"] == "open"

            await wait_for(opened, within=20)
            refused = await api.submit(headers, job_type="flaky", payload={"fail_times": 0})
            assert refused.status_code == 503 and refused.json()["code"] == "circuit_open"
            assert 1 <= int(refused.headers["Retry-After"]) <= 2
            assert (await api.submit(headers, job_type="echo")).status_code == 201  # other types unaffected
            waiting = [(await api.job(headers, j["id"]))["status"] for j in jobs]
            assert "succeeded" not in waiting  # held in the delay tiers while open

            finished = [await until_status(api, headers, j["id"], 30) for j in jobs]
            assert [j["status"] for j in finished] == ["succeeded"] * 3, process.output()[-2000:]
            assert (await circuit())["state"] == "closed"
            assert (await api.submit(headers, job_type="flaky", payload={"fail_times": 0})).status_code == 201


async def test_permanent_failures_never_open_the_breaker(tmp_path: Path) -> None:
    settings = make_settings(breaker_min_calls=2, breaker_failure_rate=0.5, breaker_cooldown_seconds=30)
    async with guarded(settings) as api:
        headers = await api.new_client("breaker-permanent")
        with app_process(["worker", "jobs"], settings_env(settings), tmp_path / "w.log"):
            jobs = [
                (await api.submit(headers, job_type="flaky", payload={"permanent": True}, max_retries=0)).json()
                for _ in range(5)
            ]
            done = [await until_status(api, headers, j["id"], 30) for j in jobs]
        assert [j["status"] for j in done] == ["dead_lettered"] * 5
        rows = (await api.client.get("/api/v1/circuits", headers=headers)).json()
        flaky = next(row for row in rows if row["job_type"] == "flaky")
        assert flaky["state"] == "closed" and flaky["failures"] == 0
        assert (await api.submit(headers, job_type="flaky", payload={"fail_times": 0})).status_code == 201


async def test_a_one_mebibyte_body_is_413_and_saves_nothing(api: Api) -> None:
    headers = await api.new_client("huge")
    body = b'{"job_type": "echo", "payload": {"blob": "' + b"x" * (1024 * 1024) + b'"}}'
    answer = await api.client.post("/api/v1/jobs", content=body, headers=headers)
    assert (answer.status_code, answer.json()["code"]) == (413, "body_too_large")
    assert (await api.client.get("/api/v1/jobs", headers=headers)).json()["items"] == []


async def test_one_submit_asks_its_limit_and_its_circuit_in_one_redis_round_trip() -> None:
    async with guarded(make_settings(rate_limit_per_minute=2)) as api:
        headers = await api.new_client("one-trip")
        redis = api.app.state.api.limiter.redis
        flushes: list[list[str]] = []
        flush = redis.commit.flush

        async def noted(commands: list[Any]) -> list[Any]:
            flushes.append([c.merged.script.sha if c.merged else c.args[1] for c in commands if c.script or c.merged])
            return await flush(commands)

        redis.commit.flush = noted
        try:
            assert (await api.submit(headers)).status_code == 201
            assert (await api.submit(headers)).status_code == 201
            # Over the limit, a bad body is still answered 429: the limit is judged first, as before.
            over = await api.client.post("/api/v1/jobs", json={"job_type": "nope"}, headers=headers)
        finally:
            redis.commit.flush = flush
        assert over.status_code == 429
        both = [f for f in flushes if SLIDE_SCRIPT.script.sha in f and CHECK_SCRIPT.sha in f]
        assert len(both) == 2, flushes
