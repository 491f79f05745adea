"""Worker processes under kill -9, SIGTERM, a broker restart and a Redis outage (of a broker and a Redis of the
test's own: the machine's are shared and never stopped): nothing lost, nothing twice."""

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Lane
from app.core.topology import build_topology
from app.main import create_app
from app.models.tables import JOB_EVENTS, JOBS
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.local.private_services import PrivateRabbit, PrivateRedis
from tests.support import (
    Api,
    BrokerProbe,
    api_with,
    app_process,
    broker_probe,
    rabbitmq_stopped,
    redis_stopped,
    trail,
    until_status,
    wait_for,
)

pytestmark = pytest.mark.slow


def worker_env(**overrides: object) -> dict[str, str]:
    return settings_env(make_settings(**overrides))


async def consumers_up(broker: BrokerProbe, expected: int = 1) -> bool:
    return await broker.consumers(broker.topology.names.lane_queue(Lane.DEFAULT)) >= expected


async def test_sigkill_mid_job_another_worker_finishes_it_once(
    api: Api, broker: BrokerProbe, db: AsyncEngine, tmp_path: Path
) -> None:
    headers = await api.new_client("crash-kill")
    env = worker_env(lock_ttl_seconds=2)
    with app_process(["worker", "jobs"], env, tmp_path / "a.log") as first:
        await wait_for(lambda: consumers_up(broker), within=20)
        job = (await api.submit(headers, job_type="sleep", payload={"seconds": 3})).json()
        await until_status(api, headers, job["id"], 20, "running")
        first.kill()
    with app_process(["worker", "jobs"], env, tmp_path / "b.log") as second:
        # Lease 2 s, then the message's hop through a delay tier, then the 3 s sleep again.
        done = await until_status(api, headers, job["id"], 30)
        assert done["status"] == "succeeded", second.output()
    assert done["attempts"] == 2  # the crash counted as an attempt
    events = [e["event"] for e in await trail(api, headers, job["id"])]
    assert events.count("succeeded") == 1 and events.count("running") == 2
    async with db.connect() as conn:
        runs = (await conn.execute(select(JOBS.c.runs).where(JOBS.c.id == job["id"]))).scalar_one()
    assert runs == 2


async def test_sigterm_lets_the_running_job_finish(api: Api, broker: BrokerProbe, tmp_path: Path) -> None:
    headers = await api.new_client("crash-term")
    with app_process(["worker", "jobs"], worker_env(shutdown_grace_seconds=10), tmp_path / "w.log") as process:
        await wait_for(lambda: consumers_up(broker), within=20)
        job = (await api.submit(headers, job_type="sleep", payload={"seconds": 1.5})).json()
        await until_status(api, headers, job["id"], 20, "running")
        exit_code = await asyncio.to_thread(process.terminate, 30)
        assert exit_code == 0, process.output()
    done = await api.job(headers, job["id"])
    assert (done["status"], done["attempts"]) == ("succeeded", 1)


async def test_sigterm_past_the_grace_period_leaves_the_job_for_redelivery(
    api: Api, broker: BrokerProbe, tmp_path: Path
) -> None:
    headers = await api.new_client("crash-grace")
    env = worker_env(shutdown_grace_seconds=0.5, lock_ttl_seconds=2)
    with app_process(["worker", "jobs"], env, tmp_path / "a.log") as process:
        await wait_for(lambda: consumers_up(broker), within=20)
        job = (await api.submit(headers, job_type="sleep", payload={"seconds": 3})).json()
        await until_status(api, headers, job["id"], 20, "running")
        assert await asyncio.to_thread(process.terminate, 30) == 0, process.output()
    assert (await api.job(headers, job["id"]))["status"] == "running"  # not finished, not lost
    with app_process(["worker", "jobs"], env, tmp_path / "b.log"):
        done = await until_status(api, headers, job["id"], 30)
    assert (done["status"], done["attempts"]) == ("succeeded", 2)


async def test_rabbitmq_restart_while_200_jobs_flow(private_rabbit: PrivateRabbit, tmp_path: Path) -> None:
    settings = make_settings(rabbitmq_url=private_rabbit.url)
    topology = build_topology(settings)
    async with api_with(create_app(settings), ADMIN_KEY) as api:
        headers = await api.new_client("crash-rabbit")
        with app_process(["worker", "jobs"], settings_env(settings), tmp_path / "w.log") as process:
            async with broker_probe(private_rabbit.url, topology) as before:
                await wait_for(lambda: consumers_up(before, settings.job_consumers_default), within=20)
                ids = [
                    (await api.submit(headers, job_type="sleep", payload={"seconds": 0.02})).json()["id"]
                    for _ in range(100)
                ]
            with rabbitmq_stopped(private_rabbit):
                # Submits during the outage are saved as pending and relayed later.
                ids += [
                    (await api.submit(headers, job_type="sleep", payload={"seconds": 0.02})).json()["id"]
                    for _ in range(100)
                ]
            async with broker_probe(private_rabbit.url, topology) as probe:
                statuses = await _all_finished(api, headers, ids, within=90)
                assert statuses == {"succeeded": 200}, process.output()[-3000:]
                names = probe.topology.names
                consumers = {lane: await probe.consumers(names.lane_queue(lane)) for lane in Lane}
                assert consumers == {
                    Lane.CRITICAL: settings.job_consumers_critical,
                    Lane.DEFAULT: settings.job_consumers_default,
                    Lane.BULK: settings.job_consumers_bulk,
                }


async def test_redis_down_jobs_still_finish_on_the_database_lease(
    private_redis: PrivateRedis, broker: BrokerProbe, tmp_path: Path
) -> None:
    settings = make_settings(redis_url=private_redis.url)
    async with api_with(create_app(settings), ADMIN_KEY) as api:
        headers = await api.new_client("crash-redis")
        with app_process(["worker", "jobs"], settings_env(settings), tmp_path / "w.log") as process:
            await wait_for(lambda: consumers_up(broker), within=20)
            with redis_stopped(private_redis):
                ids = [
                    (await api.submit(headers, job_type="sleep", payload={"seconds": 0.05})).json()["id"]
                    for _ in range(20)
                ]
                statuses = await _all_finished(api, headers, ids, within=60)
            assert statuses == {"succeeded": 20}, process.output()[-3000:]


async def test_500_echo_jobs_through_one_worker_process_each_exactly_once(
    api: Api, broker: BrokerProbe, db: AsyncEngine, tmp_path: Path
) -> None:
    headers = await api.new_client("crash-500")
    ids: list[str] = []
    for _ in range(10):
        answers = await asyncio.gather(*(api.submit(headers, payload={"i": i}) for i in range(50)))
        ids += [a.json()["id"] for a in answers]
    with app_process(["worker", "jobs"], worker_env(), tmp_path / "w.log") as process:
        assert await _all_finished(api, headers, ids, within=120) == {"succeeded": 500}, process.output()[-3000:]
    async with db.connect() as conn:
        runs = (
            await conn.execute(select(JOBS.c.runs, func.count()).where(JOBS.c.id.in_(ids)).group_by(JOBS.c.runs))
        ).all()
        trails = await conn.execute(
            select(JOB_EVENTS.c.job_id, JOB_EVENTS.c.event)
            .where(JOB_EVENTS.c.job_id.in_(ids))
            .order_by(JOB_EVENTS.c.id)
        )
        events: dict[str, list[str]] = {}
        for job_id, event in trails:
            events.setdefault(job_id, []).append(event)
    assert [tuple(r) for r in runs] == [(1, 500)]
    # submitted with no worker running: all but the client's share of the lane waited their turn (`held`)
    straight = ("created", "queued", "running", "succeeded")
    assert {tuple(v) for v in events.values()} == {straight, ("created", "queued", "held", *straight[2:])}
    assert len(events) == 500


async def _all_finished(api: Api, headers: dict[str, str], ids: list[str], within: float) -> dict[str, int]:
    wanted = set(ids)

    async def counts() -> dict[str, int] | None:
        seen: dict[str, str] = {}
        cursor = None
        while True:
            query = "/api/v1/jobs?limit=200" + (f"&cursor={cursor}" if cursor else "")
            body = (await api.client.get(query, headers=headers)).json()
            seen.update({j["id"]: j["status"] for j in body["items"] if j["id"] in wanted})
            cursor = body["next_cursor"]
            if cursor is None:
                break
        tally: dict[str, int] = {}
        for status in seen.values():
            tally[status] = tally.get(status, 0) + 1
        finished = sum(n for s, n in tally.items() if s in ("succeeded", "dead_lettered", "cancelled"))
        return tally if finished == len(wanted) else None

    result = await wait_for(counts, within=within, interval=0.5)
    assert result is not None
    return result
