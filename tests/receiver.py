"""A real HTTP receiver on 127.0.0.1 for webhook tests: records every request, answers as scripted."""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import uvicorn
from starlette.requests import Request
from starlette.responses import Response

from tests.support import free_port, wait_for

Answer = Callable[["Received"], Response]


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)


@dataclass
class Receiver:
    port: int
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answered in order; 200 once they run out
    delay: float = 0.0
    delays: dict[str, float] = field(default_factory=dict)  # per path, on top of `delay`
    answer: Answer | None = None

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:  # type: ignore[type-arg]
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        received = Received(request.url.path, {k.lower(): v for k, v in request.headers.items()}, await request.body())
        self.requests.append(received)
        if self.delay or request.url.path in self.delays:
            await asyncio.sleep(self.delay + self.delays.get(request.url.path, 0))
        if self.answer is not None:
            response = self.answer(received)
        else:
            response = Response(status_code=self.statuses.pop(0) if self.statuses else 200, content=b"ok")
        await response(scope, receive, send)

    def on(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == path]


def _started(server: uvicorn.Server) -> Callable[[], Awaitable[bool]]:
    async def started() -> bool:
        return server.started

    return started


@contextlib.asynccontextmanager
async def running_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver(free_port())
    config = uvicorn.Config(receiver, host="127.0.0.1", port=receiver.port, log_config=None, lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await wait_for(_started(server), within=10, interval=0.01)
    try:
        yield receiver
    finally:
        server.should_exit = True
        await task
