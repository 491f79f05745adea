"""The service as a user runs it (`python -m app api`, workers embedded, on a free loopback port), and the example
receivers as a user starts them."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from redis.asyncio import Redis

from app.core.names import Names
from tests.conftest import ADMIN_KEY, REDIS_URL, make_settings, settings_env
from tests.support import Process, app_process, free_port, wait_for

NODE_MODULES = Path(__file__).resolve().parent / "node_modules"


@dataclass(frozen=True)
class Service:
    base_url: str
    admin_key: str
    process: Process


@contextlib.asynccontextmanager
async def live_service(log: Path, **overrides: Any) -> AsyncIterator[Service]:
    """Serve until the block ends; ready once /ready says every component is up. A worker an operator stopped
    through the API is forgotten afterwards, so the tests that follow find their workers running."""
    settings = make_settings(port=free_port(), embedded_workers=True, **overrides)
    base_url = f"http://127.0.0.1:{settings.port}"
    with app_process(["api"], settings_env(settings), log) as process:
        async with httpx.AsyncClient(base_url=base_url, timeout=5) as client:

            async def ready() -> bool:
                assert process.popen.poll() is None, process.output()
                try:
                    return (await client.get("/ready")).status_code == 200
                except httpx.TransportError:
                    return False

            await wait_for(ready, within=30, interval=0.1)
        try:
            yield Service(base_url, ADMIN_KEY, process)
        finally:
            redis = Redis.from_url(REDIS_URL)
            await redis.delete(Names(settings.namespace).worker_desired_key)
            await redis.aclose()


@contextlib.asynccontextmanager
async def running_example(command: list[str], port: int, out: Path, **env: str) -> AsyncIterator[None]:
    """A receiver from examples/ on `port`, printing into `out`; listening when the block starts."""
    env = {"PORT": str(port), "PATH": "/usr/bin:/bin", "NODE_PATH": str(NODE_MODULES), **env}
    with out.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(*command, env=env, stdout=sink, stderr=asyncio.subprocess.STDOUT)
    try:
        await wait_for(lambda: _listening(port, process), within=20)
        yield
    finally:
        process.kill()
        await process.wait()


async def printed(out: Path, word: str) -> str | None:
    """What a receiver printed, once it has printed `word`."""
    text = await asyncio.to_thread(out.read_text)
    return text if word in text else None


async def _listening(port: int, process: asyncio.subprocess.Process) -> bool:
    assert process.returncode is None, "the receiver exited"
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True
