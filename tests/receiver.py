"""A real HTTP receiver on 127.0.0.1 for webhook tests: records every request, answers as scripted; and the same
receiver behind a server that counts its TCP connections."""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.requests import Request
from starlette.responses import Response
from uvicorn.protocols.http.h11_impl import H11Protocol

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
    holds: dict[str, asyncio.Event] = field(default_factory=dict)  # per path: answered once the event is set
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
        if request.url.path in self.holds:
            await self.holds[request.url.path].wait()
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
async def served(app: Any, port: int, **options: Any) -> AsyncIterator[None]:
    """An ASGI app served by uvicorn on 127.0.0.1:`port` in this event loop (`options`: more of uvicorn's config),
    listening when the block starts."""
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off", **options)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await wait_for(_started(server), within=10, interval=0.01)
    try:
        yield
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def running_receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver(free_port())
    async with served(receiver, receiver.port):
        yield receiver


@dataclass
class Server:
    """A Receiver behind uvicorn that also counts the TCP connections it accepted and its requests in flight."""

    receiver: Receiver
    connections: int = 0
    in_flight: int = 0
    most_in_flight: int = 0

    def url(self, path: str = "/hook", host: str = "127.0.0.1", scheme: str = "http") -> str:
        return f"{scheme}://{host}:{self.receiver.port}{path}"

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.receiver(scope, receive, send)
        finally:
            self.in_flight -= 1

    def protocol(self) -> type[H11Protocol]:
        server = self

        class Counting(H11Protocol):
            def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
                server.connections += 1
                super().connection_made(transport)

        return Counting


@contextlib.asynccontextmanager
async def serving(tls: Path | None = None) -> AsyncIterator[Server]:
    """A Server on 127.0.0.1; with `tls`, HTTPS with the cert.pem and key.pem in that directory."""
    server = Server(Receiver(free_port()))
    certificates = {} if tls is None else {"ssl_certfile": tls / "cert.pem", "ssl_keyfile": tls / "key.pem"}
    async with served(server, server.receiver.port, http=server.protocol(), **certificates):
        yield server
