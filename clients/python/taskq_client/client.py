"""`Client` and `AsyncClient`: every operation of the API (generated, `_operations.py`) and what a caller wants on top
of them: a submit by type and payload that can wait for the result, a wait for a job, iterators over every page of
a list, and the live event streams as iterators that reconnect where they left off."""

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from taskq_client import models
from taskq_client._operations import AsyncOps, Ops
from taskq_client.sse import Event, astream, stream

T = TypeVar("T", covariant=True)
MAX_WAIT = 60.0  # the API's longest `wait`, in seconds
FINISHED = frozenset({"succeeded", "dead_lettered", "cancelled"})


class Page(Protocol[T]):
    """A page of a list: its items, and the cursor of the next page (None: the last)."""

    @property
    def items(self) -> Sequence[T]: ...

    @property
    def next_cursor(self) -> str | None: ...


def _job(job_type: str, payload: Any, options: dict[str, Any]) -> dict[str, Any]:
    return {"job_type": job_type, "payload": {} if payload is None else payload, **options}


def _filters(types: Iterable[str] | None, job_type: str | None) -> dict[str, str]:
    found = {"types": ",".join(types)} if types else {}
    return found | ({"job_type": job_type} if job_type else {})


def _status(job: models.JobOut) -> str:
    return str(getattr(job.status, "value", job.status))


class Client(Ops):
    """The API, synchronously: `Client(base_url, api_key)`, closed by `close()` or a `with` block."""

    def __enter__(self) -> "Client":
        return self

    def submit(
        self,
        job_type: str,
        payload: Any = None,
        *,
        wait: float | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> models.JobOut:
        """Submit one job (`options`: `priority`, `max_retries`, `run_at`, `concurrency`, … as the API takes them);
        with `wait` (seconds, up to 60), the answer comes once it finished or the wait is over."""
        body = _job(job_type, payload, options)
        return self.submit_job(body, wait=wait, idempotency_key=idempotency_key)

    def wait_for(self, job_id: str, within: float = MAX_WAIT) -> models.JobOut:
        """The job once it finished (`succeeded`, `dead_lettered`, `cancelled`), or as it stands after `within`
        seconds."""
        deadline = time.monotonic() + within
        while True:
            left = deadline - time.monotonic()
            job = self.get_job(job_id, wait=min(MAX_WAIT, left) if left > 0 else None)
            if _status(job) in FINISHED or left <= 0:
                return job

    def pages(self, call: Callable[..., Page[T]], **filters: Any) -> Iterator[T]:
        """Every item of a paged list, page after page: `client.pages(client.list_jobs, status="succeeded")`."""
        cursor = None
        while True:
            page = call(**filters, cursor=cursor)
            yield from page.items
            cursor = page.next_cursor
            if not cursor:
                return

    def events(
        self, *, types: Iterable[str] | None = None, job_type: str | None = None, last_event_id: str | None = None
    ) -> Iterator[Event]:
        """Every event of your jobs and workflows as it happens (`GET /api/v1/events/stream`), without end; a
        dropped connection is opened again after the last event read. Stop by leaving the loop."""
        return stream(self.http, "/api/v1/events/stream", _filters(types, job_type), last_event_id, False)

    def job_events_live(self, job_id: str, *, last_event_id: str | None = None) -> Iterator[Event]:
        """One job's events (`GET /api/v1/jobs/{id}/stream`): its state now, then each change, ending after it
        finished."""
        return stream(self.http, f"/api/v1/jobs/{job_id}/stream", {}, last_event_id, True)


class AsyncClient(AsyncOps):
    """The API, for asyncio: `AsyncClient(base_url, api_key)`, closed by `aclose()` or an `async with` block."""

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def submit(
        self,
        job_type: str,
        payload: Any = None,
        *,
        wait: float | None = None,
        idempotency_key: str | None = None,
        **options: Any,
    ) -> models.JobOut:
        """See `Client.submit`."""
        body = _job(job_type, payload, options)
        return await self.submit_job(body, wait=wait, idempotency_key=idempotency_key)

    async def wait_for(self, job_id: str, within: float = MAX_WAIT) -> models.JobOut:
        """See `Client.wait_for`."""
        deadline = time.monotonic() + within
        while True:
            left = deadline - time.monotonic()
            job = await self.get_job(job_id, wait=min(MAX_WAIT, left) if left > 0 else None)
            if _status(job) in FINISHED or left <= 0:
                return job

    async def pages(self, call: Callable[..., Awaitable[Page[T]]], **filters: Any) -> AsyncIterator[T]:
        """See `Client.pages`: `async for job in client.pages(client.list_jobs): …`."""
        cursor = None
        while True:
            page = await call(**filters, cursor=cursor)
            for item in page.items:
                yield item
            cursor = page.next_cursor
            if not cursor:
                return

    def events(
        self, *, types: Iterable[str] | None = None, job_type: str | None = None, last_event_id: str | None = None
    ) -> AsyncIterator[Event]:
        """See `Client.events`: `async for event in client.events(): …`."""
        return astream(self.http, "/api/v1/events/stream", _filters(types, job_type), last_event_id, False)

    def job_events_live(self, job_id: str, *, last_event_id: str | None = None) -> AsyncIterator[Event]:
        """See `Client.job_events_live`."""
        return astream(self.http, f"/api/v1/jobs/{job_id}/stream", {}, last_event_id, True)
