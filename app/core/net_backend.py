# ruff: noqa: ASYNC109  (httpcore's interface passes `timeout` by that name)
"""httpcore's network backend on plain asyncio streams.

httpcore dials through anyio by default, which wraps every read and write of every request in a cancel scope
of its own; the service runs on asyncio (uvloop) only, so its connections use asyncio's streams directly, each
read and write timed with `asyncio.timeout`. Errors map to httpcore's exceptions as its own backends map them.
"""

import asyncio
import socket
import ssl
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpcore

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
READ_SIZE_LIMIT = 2**16


@contextmanager
def _mapped(on_timeout: type[Exception], on_error: type[Exception]) -> Iterator[None]:
    try:
        yield
    except TimeoutError as exc:
        raise on_timeout(str(exc) or "timed out") from exc
    except (OSError, EOFError) as exc:  # ssl.SSLError is an OSError
        raise on_error(str(exc) or type(exc).__name__) from exc


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _mapped(httpcore.ReadTimeout, httpcore.ReadError):
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        with _mapped(httpcore.WriteTimeout, httpcore.WriteError):
            async with asyncio.timeout(timeout):
                self._writer.write(buffer)
                await self._writer.drain()

    async def aclose(self) -> None:
        self._writer.close()
        with suppress(OSError):  # closing a connection the peer already dropped
            await self._writer.wait_closed()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        try:
            with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
                async with asyncio.timeout(timeout):
                    await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
        except BaseException:
            self._writer.transport.abort()
            raise
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":  # an idle pooled connection the server closed
            return self._reader.at_eof() or self._writer.transport.is_closing()
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = None if local_address is None else (local_address, 0)
        with _mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(host, port, local_addr=local, limit=READ_SIZE_LIMIT)
        sock: socket.socket | None = writer.get_extra_info("socket")
        for option in socket_options or ():
            if sock is not None:
                sock.setsockopt(*option)
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SocketOption] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not dialled")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
