"""The Python client (clients/python): generated from the API as it is, installable with pip from the repository, and
every part of it used against the running service (`python -m app api`, workers embedded, a database and namespace
of its own): sync and async calls into their models, a submit that waits, batches and workflows, page iterators,
errors with their code and Retry-After, the live events with a reconnect through a cut connection, and a webhook
verified with `verify_webhook`."""

import asyncio
import contextlib
import importlib.util
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from taskq_client import (
    API_VERSION,
    ApiError,
    AsyncClient,
    Client,
    Event,
    WebhookVerificationError,
    models,
    verify_webhook,
)

from app.main import create_app
from tests.conftest import make_settings, world_of_its_own
from tests.live_service import Service, live_service
from tests.receiver import Receiver, running_receiver
from tests.support import wait_for

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"
GENERATED = ("openapi.json", "taskq_client/models.py", "taskq_client/_operations.py")


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("client_generate", CLIENT / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_client_is_generated_from_the_api_as_it_is(tmp_path: Path) -> None:
    generator().generate(tmp_path)
    stale = [name for name in GENERATED if (tmp_path / name).read_text() != (CLIENT / name).read_text()]
    assert stale == [], f"run .venv/bin/python clients/python/generate.py: {stale} differ"


def test_the_client_is_versioned_with_the_api() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert project["version"] == API_VERSION == create_app(make_settings()).version


def test_pip_installs_the_client_from_the_repository(tmp_path: Path) -> None:
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    subprocess.run([*pip, "--target", str(target), str(CLIENT)], check=True, capture_output=True, cwd=tmp_path)
    where = "import sys; sys.path.insert(0, sys.argv[1]); import taskq_client; print(taskq_client.__file__)"
    found = subprocess.run([sys.executable, "-c", where, str(target)], check=True, capture_output=True, text=True)
    assert found.stdout.strip() == str(target / "taskq_client" / "__init__.py")


def test_an_error_answer_carries_its_code_fields_and_retry_after() -> None:
    body = {"detail": "Over the limit.", "code": "rate_limited", "errors": []}
    answer = httpx.Response(429, json=body, headers={"Retry-After": "7", "X-Request-ID": "r-1"})
    error = ApiError.of(answer)
    assert (error.status, error.code, error.retry_after, error.request_id) == (429, "rate_limited", 7.0, "r-1")
    assert str(error) == "429 rate_limited: Over the limit."


@dataclass
class World:
    service: Service
    receiver: Receiver

    def client(self, key: str | None = None) -> Client:
        return Client(self.service.base_url, key or self.service.admin_key)

    def async_client(self, key: str | None = None) -> AsyncClient:
        return AsyncClient(self.service.base_url, key or self.service.admin_key)

    async def new_key(self, client_id: str) -> str:
        async with self.async_client() as admin:
            created = await admin.create_api_key(models.ApiKeyCreate(client_id=client_id))
        return created.api_key


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    log = tmp_path_factory.mktemp("pyclient") / "api.log"
    async with (
        world_of_its_own("pyclient") as own,
        live_service(log, rate_limit_per_minute=10_000, **own) as service,
        running_receiver() as receiver,
    ):
        yield World(service, receiver)


def _sync_walk(world: World, key: str) -> None:
    with world.client(key) as client:
        done = client.submit("echo", {"hello": "world"}, wait=20)
        assert isinstance(done, models.JobOut)
        assert (done.status.value, done.result) == ("succeeded", {"hello": "world"})
        batch = client.submit_batch({"jobs": [{"job_type": "echo", "payload": {"n": n}} for n in range(5)]})
        ids = [item.job.id for item in batch.items]
        assert [client.wait_for(job_id, within=20).status.value for job_id in ids] == ["succeeded"] * 5
        listed = list(client.pages(client.list_jobs, limit=2, job_type="echo"))
        assert {job.id for job in listed} >= {done.id, *ids} and len(listed) == len({job.id for job in listed})
        with pytest.raises(ApiError) as missing:
            client.get_job("00000000-0000-4000-8000-000000000000")
        assert (missing.value.status, missing.value.code) == (404, "not_found")
        with pytest.raises(ApiError) as invalid:
            client.submit("echo", {}, priority=99)
        assert invalid.value.code == "validation_error" and invalid.value.errors


async def test_the_sync_client_submits_waits_pages_and_raises_errors(world: World) -> None:
    await asyncio.to_thread(_sync_walk, world, await world.new_key("pyclient-sync"))


async def test_the_async_client_runs_a_workflow_to_its_end(world: World) -> None:
    async with world.async_client(await world.new_key("pyclient-async")) as client:
        jobs = [
            {"ref": "render", "job_type": "echo", "payload": {"page": 1}},
            {"ref": "notify", "job_type": "echo", "payload": {}, "depends_on": ["render"]},
        ]
        workflow = await client.submit_workflow({"jobs": jobs})
        assert isinstance(workflow, models.WorkflowOut)

        async def ended() -> models.WorkflowOut | None:
            found = await client.get_workflow(workflow.id)
            return found if found.status.value != "running" else None

        finished = await wait_for(ended, within=30)
        assert finished.status.value == "succeeded" and finished.counts == {"succeeded": 2}


class CuttingProxy:
    """A loopback TCP proxy to the service whose open connections can be cut, as a network drop would."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.connections = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers += [writer, up_writer]
        self.connections += 1

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for writer in self.writers:
            writer.transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        if self.server is not None:
            self.server.close()


async def test_the_events_iterator_reconnects_after_a_cut_and_misses_nothing(world: World) -> None:
    key = await world.new_key("pyclient-events")
    proxy = CuttingProxy(int(world.service.base_url.rsplit(":", 1)[1]))
    port = await proxy.start()
    seen: list[Event] = []
    try:
        async with (
            AsyncClient(f"http://127.0.0.1:{port}", key) as watching,
            world.async_client(key) as submitting,
        ):
            events = watching.events(types=["job.succeeded"])
            reading = asyncio.ensure_future(events.__anext__())
            await asyncio.sleep(0.5)  # the stream is open before the first job is submitted
            first = await submitting.submit("echo", {"n": 1})
            seen.append(await asyncio.wait_for(reading, 30))
            proxy.cut()  # the stream drops; the iterator opens it again with the last event's id
            second = await submitting.submit("echo", {"n": 2})
            seen.append(await asyncio.wait_for(events.__anext__(), 30))
            await events.aclose()  # type: ignore[attr-defined]
    finally:
        await proxy.close()
    assert proxy.connections == 2  # the stream, and the stream opened again after the cut
    assert [event.data["job"]["id"] for event in seen] == [first.id, second.id]
    assert [event.type for event in seen] == ["job.succeeded", "job.succeeded"]


async def test_the_events_iterator_raises_a_refusal_it_cannot_retry(world: World) -> None:
    async with AsyncClient(world.service.base_url, "tq_not_a_key") as stranger:
        with pytest.raises(ApiError) as refused:
            await asyncio.wait_for(stranger.events().__anext__(), 10)
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")


def _received(receiver: Receiver, path: str) -> Iterator[tuple[dict[str, str], bytes]]:
    for request in receiver.on(path):
        yield request.headers, request.body


async def test_verify_webhook_accepts_a_real_delivery_and_refuses_a_changed_one(world: World) -> None:
    async with world.async_client(await world.new_key("pyclient-hooks")) as client:
        hook = await client.create_webhook({"url": world.receiver.url("/pyclient"), "events": ["job.succeeded"]})
        job = await client.submit("echo", {"signed": True})

        async def delivered() -> bool:
            return bool(world.receiver.on("/pyclient"))

        await wait_for(delivered, within=30)
    headers, body = next(_received(world.receiver, "/pyclient"))
    event = verify_webhook(hook.secret, headers, body)
    assert (event["type"], event["data"]["job"]["id"]) == ("job.succeeded", job.id)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(hook.secret, headers, body.replace(b"true", b"false"))
    with pytest.raises(WebhookVerificationError):
        verify_webhook(hook.secret, headers, body, now=float(headers["webhook-timestamp"]) + 301)


async def test_the_watch_example_follows_each_job_to_its_end(world: World) -> None:
    key = await world.new_key("pyclient-example")
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, str(CLIENT.parents[1] / "examples" / "watch.py"), "2"),
        env={"API": world.service.base_url, "KEY": key, "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    lines = [line.split(" ", 2) for line in out.decode().splitlines()]
    assert [(kind, payload) for kind, _, payload in lines if kind == "job.succeeded"] == [
        ("job.succeeded", "{'n': 0}"),
        ("job.succeeded", "{'n': 1}"),
    ]
    assert lines[-1][0] == "job.succeeded" and len({job_id for _, job_id, _ in lines}) == 2
