"""The API's two Server-Sent Events streams as iterators of events: read line by line, and on a dropped connection
opened again with `Last-Event-ID`, so the service replays what followed the last event read (from its audit trail)
before it goes live again; nothing is missed and nothing is read twice."""

import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx

from taskq_client._base import ApiError

RECONNECT_SECONDS = 1.0  # until the stream says otherwise (`retry:`)
TERMINAL = frozenset({"job.succeeded", "job.dead_lettered", "job.cancelled"})


@dataclass(frozen=True)
class Event:
    """One event as the streams (and webhooks) carry it: its id, its type and its whole body."""

    id: str
    type: str
    body: dict[str, Any]

    @property
    def data(self) -> dict[str, Any]:
        """The body's `data`: `{"job": …}` or `{"workflow": …}`."""
        data: dict[str, Any] = self.body.get("data", {})
        return data


@dataclass
class Parser:
    """The stream's lines into events (the SSE format: fields, a blank line ends an event, `:` a comment)."""

    last_id: str | None = None
    retry: float = RECONNECT_SECONDS
    _data: list[str] = field(default_factory=list)
    _kind: str = ""
    _id: str | None = None

    def feed(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._kind = value
        elif name == "id":
            self._id = value
        elif name == "retry" and value.isdigit():
            self.retry = int(value) / 1000
        return None

    def _dispatch(self) -> Event | None:
        data, kind, event_id = "\n".join(self._data), self._kind, self._id
        self._data, self._kind, self._id = [], "", None
        if event_id is not None:
            self.last_id = event_id
        if not data:
            return None
        body = json.loads(data)
        return Event(event_id or str(body.get("id", "")), kind or str(body.get("type", "")), body)


def _headers(last_id: str | None) -> dict[str, str]:
    return {"Accept": "text/event-stream", **({"Last-Event-ID": last_id} if last_id else {})}


def _refused(answer: httpx.Response) -> None:
    """An error answer to opening the stream: a client error (a 401, a 404) raises `ApiError`; a server's (a 503
    while it restarts) is tried again, as a dropped connection is."""
    if answer.status_code < 500:
        raise ApiError.of(answer)


def stream(
    http: httpx.Client, url: str, params: dict[str, str], last_id: str | None, until_terminal: bool
) -> Iterator[Event]:
    """Events of the stream at `url`, reconnecting after a drop or a server error; with `until_terminal`, ends after
    a job's terminal event (the job stream's end). A client error (a 401, a 404) raises `ApiError`."""
    parser = Parser(last_id)
    while True:
        try:
            with http.stream("GET", url, params=params, headers=_headers(parser.last_id), timeout=None) as answer:
                if answer.status_code >= 400:
                    answer.read()
                    _refused(answer)
                else:
                    for line in answer.iter_lines():
                        event = parser.feed(line)
                        if event is not None:
                            yield event
                            if until_terminal and event.type in TERMINAL:
                                return
        except (httpx.TransportError, httpx.RemoteProtocolError):
            pass
        time.sleep(parser.retry)


async def astream(
    http: httpx.AsyncClient, url: str, params: dict[str, str], last_id: str | None, until_terminal: bool
) -> AsyncIterator[Event]:
    """`stream`, for the async client."""
    parser = Parser(last_id)
    while True:
        try:
            async with http.stream("GET", url, params=params, headers=_headers(parser.last_id), timeout=None) as answer:
                if answer.status_code >= 400:
                    await answer.aread()
                    _refused(answer)
                else:
                    async for line in answer.aiter_lines():
                        event = parser.feed(line)
                        if event is not None:
                            yield event
                            if until_terminal and event.type in TERMINAL:
                                return
        except (httpx.TransportError, httpx.RemoteProtocolError):
            pass
        await anyio.sleep(parser.retry)
