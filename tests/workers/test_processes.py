"""`--processes N`: N worker (or API) processes under one parent, stopped together."""

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.core.names import Lane
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.support import ROOT, Api, BrokerProbe, Process, app_process, free_port, until_serving, until_status, wait_for

pytestmark = pytest.mark.slow

LANES = {"job_consumers_default": 2, "job_consumers_critical": 0, "job_consumers_bulk": 0}


async def consumers_are(broker: BrokerProbe, count: int) -> bool:
    return await broker.consumers(broker.topology.names.lane_queue(Lane.DEFAULT)) == count


async def test_two_processes_consume_together_and_stop_together_on_sigterm(
    api: Api, broker: BrokerProbe, tmp_path: Path
) -> None:
    headers = await api.new_client("procs-term")
    env = settings_env(make_settings(**LANES))
    with app_process(["worker", "jobs", "--processes", "2"], env, tmp_path / "w.log") as parent:
        await wait_for(lambda: consumers_are(broker, 4), within=30)  # 2 consumers in each of 2 processes
        ids = [(await api.submit(headers, job_type="echo", payload={"n": n})).json()["id"] for n in range(10)]
        for job_id in ids:
            assert (await until_status(api, headers, job_id, 20))["status"] == "succeeded", parent.output()
        assert await asyncio.to_thread(parent.terminate, 30) == 0, parent.output()
    await wait_for(lambda: consumers_are(broker, 0), within=15)


@pytest.mark.usefixtures("api")  # its start-up declares the lanes whose consumers this test counts
async def test_children_die_with_a_killed_parent(broker: BrokerProbe, tmp_path: Path) -> None:
    env = settings_env(make_settings(**LANES))
    with app_process(["worker", "jobs", "--processes", "2"], env, tmp_path / "w.log") as parent:
        await wait_for(lambda: consumers_are(broker, 4), within=30)
        parent.kill()
    await wait_for(lambda: consumers_are(broker, 0), within=15)


def refused(env: dict[str, str], processes: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", "worker", "jobs", "--processes", processes],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_process_count_below_one_is_refused_with_a_sentence() -> None:
    done = refused(settings_env(make_settings()), "0")
    assert (done.returncode, "--processes must be 1 or more" in done.stderr) == (2, True)


def test_several_processes_on_sqlite_are_refused_with_a_sentence(sqlite_url: str) -> None:
    done = refused(settings_env(make_settings(database_url=sqlite_url)), "2")
    assert (done.returncode, "SQLite serves one process" in done.stderr) == (2, True)


@contextlib.asynccontextmanager
async def two_api_processes(tmp_path: Path) -> AsyncIterator[tuple[Process, httpx.AsyncClient]]:
    """`api --processes 2` serving, both children up, and a client of its port."""
    port = free_port()
    env = settings_env(make_settings(port=port))
    with app_process(["api", "--processes", "2"], env, tmp_path / "api.log") as parent:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await until_serving(client)
            await wait_for(lambda: _serving_children(parent.popen.pid, 2), within=30)
            yield parent, client


async def test_two_api_processes_serve_one_port_and_stop_on_sigterm(tmp_path: Path) -> None:
    async with two_api_processes(tmp_path) as (parent, client):
        assert (await client.get("/health")).json() == {"status": "ok"}
        assert await asyncio.to_thread(parent.terminate, 30) == 0, parent.output()


async def test_api_processes_end_with_a_killed_parent(tmp_path: Path) -> None:
    """A SIGKILLed parent leaves no API process behind holding the port (the kernel sends each SIGTERM)."""
    async with two_api_processes(tmp_path) as (parent, client):
        children = _spawned(parent.popen.pid)
        parent.kill()  # the parent alone: its children are not signalled by anyone but the kernel

        async def all_gone() -> bool:
            return not any(_running(child) for child in children)

        await wait_for(all_gone, within=30, interval=0.2)
        with pytest.raises(httpx.ConnectError):
            await client.get("/health")


def _running(pid: str) -> bool:
    """Whether the process exists and is not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def _serving_children(pid: int, count: int) -> bool:
    return await asyncio.to_thread(_has_children, pid, count)


def _has_children(pid: int, count: int) -> bool:
    """Whether `pid` has `count` uvicorn worker processes (multiprocessing children running our app)."""
    return len(_spawned(pid)) >= count


def _spawned(pid: int) -> list[str]:
    """The pids of `pid`'s multiprocessing children (uvicorn's worker processes)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [c for c in children if b"multiprocessing" in Path(f"/proc/{c}/cmdline").read_bytes()]


async def test_api_processes_busy_with_a_long_request_end_soon_after_a_killed_parent(tmp_path: Path) -> None:
    """A request that waits a minute for its job (no worker runs it) does not keep a child alive for that minute
    once its parent was SIGKILLed: the child stops gracefully, and at the end of its shutdown grace (10 s in the
    tests) it exits whatever is still open."""
    async with two_api_processes(tmp_path) as (parent, client):
        children = _spawned(parent.popen.pid)
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        key = (await client.post("/api/v1/api-keys", json={"client_id": "long-wait"}, headers=admin)).json()
        headers = {"Authorization": f"Bearer {key['api_key']}"}
        body = {"job_type": "echo", "payload": {}}
        waiting = asyncio.create_task(client.post("/api/v1/jobs?wait=60", json=body, headers=headers, timeout=90))

        async def saved() -> bool:  # the job is saved, so its request is now waiting for it
            return bool((await client.get("/api/v1/jobs", headers=headers)).json()["items"])

        try:
            await wait_for(saved, within=30)
            parent.kill()

            async def all_gone() -> bool:
                return not any(_running(child) for child in children)

            await wait_for(all_gone, within=40, interval=0.2)
        finally:
            waiting.cancel()
            await asyncio.gather(waiting, return_exceptions=True)
