"""Fixtures of the flow tests: the dashboard's running service and browser, shared by every dashboard test module
of the session (each test signs in with a key of its own, so tests do not see each other's jobs). The service has a
database and a namespace of its own: it outlives the dashboard modules, and its embedded workers, relay and
scheduler must never take another test's jobs or messages."""

from collections.abc import AsyncIterator

import httpx
import pytest
from playwright.async_api import Browser

from tests.browser import Tab, chromium, tab
from tests.conftest import make_settings, settings_env, world_of_its_own
from tests.flows.dashboard import WITHIN, Service, feed_is_live
from tests.receiver import running_receiver
from tests.support import Process, app_process, env_without_dotenv, free_port, wait_for


@pytest.fixture(scope="session")
async def api_process(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Process, int]]:
    port = free_port()
    log = tmp_path_factory.mktemp("dashboard") / "api.log"
    async with world_of_its_own("dashboard") as world:
        settings = make_settings(port=port, embedded_workers=True, worker_heartbeat_seconds=0.5, **world)
        with app_process(["api"], env_without_dotenv(settings_env(settings)), log) as process:
            yield process, port


@pytest.fixture(scope="session")
async def service(api_process: tuple[Process, int]) -> AsyncIterator[Service]:
    """`python -m app api` with the job and webhook workers embedded, as `make run` serves it; a receiver for
    webhooks on loopback."""
    process, port = api_process
    async with (
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WITHIN) as http,
        running_receiver() as receiver,
    ):
        running = Service(f"http://127.0.0.1:{port}", http, receiver, process)

        async def workers_running() -> bool:
            try:
                answer = await http.get("/api/v1/workers/job_worker", headers=Service.admin)
            except httpx.TransportError:
                return False
            return answer.status_code == 200 and [w["state"] for w in answer.json()["items"]] == ["running"]

        try:
            await wait_for(workers_running, within=60, interval=0.2)
        except AssertionError as exc:
            raise AssertionError(f"the service did not start its workers: {process.output()}") from exc
        await feed_is_live(running)
        yield running


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as running:
        yield running


@pytest.fixture
async def tab_of(browser: Browser) -> AsyncIterator[Tab]:
    """A fresh tab; the test fails if the page logged an error it did not expect."""
    async with tab(browser) as opened:
        yield opened
        assert opened.unexpected() == []
