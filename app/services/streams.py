"""The live-status streams: one job's events, and every event a caller may see. Each subscribes first, then
reads what it must send from the database, then goes live, skipping what it already sent: no gap, no duplicate."""

from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import PROGRESS_EVENT, WORKFLOW_EVENTS, Names, event_type
from app.core.statuses import TERMINAL, JobStatus
from app.models.rows import JobRow, job_row
from app.models.tables import JOBS
from app.services.event_trail import EventRef, as_event, events_after, job_events_after, parse_event_id
from app.services.live import EventFeed, Hub, LiveEvent, Subscription
from app.services.tenancy import Principal, sees, visible_to

EVENT_TYPES = frozenset(event_type(status) for status in JobStatus) | {PROGRESS_EVENT, *WORKFLOW_EVENTS}
TERMINAL_TYPES = frozenset(event_type(status) for status in TERMINAL)
SEEN_JOBS = 10_000  # jobs whose last seq an events stream remembers, to drop a re-published event
FEED_WAIT_SECONDS = 5.0  # how long a stream that opens waits for the feed's queue to be bound


class UnknownEventType(ValueError):
    """A `types` filter named something that is not a job event type."""


@dataclass(frozen=True)
class EventFilter:
    """Which events an events stream carries, besides the caller's own: a job type, event types (empty: all)."""

    job_type: str | None = None
    types: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, job_type: str | None, types: str | None) -> "EventFilter":
        """From the query string; UnknownEventType for a type no job event has."""
        wanted = frozenset(t.strip() for t in (types or "").split(",") if t.strip())
        if unknown := wanted - EVENT_TYPES:
            raise UnknownEventType(", ".join(sorted(unknown)))
        return cls(job_type or None, wanted)

    def admits(self, event: LiveEvent) -> bool:
        return (self.job_type is None or event.job_type == self.job_type) and (
            not self.types or event.type in self.types
        )


class LastSeqs:
    """The last seq sent per job (the most recent SEEN_JOBS jobs), so nothing goes out twice."""

    def __init__(self) -> None:
        self._seqs: dict[str, int] = {}

    def is_new(self, event: LiveEvent) -> bool:
        """Whether the event is past what was sent of its job; remembers it if so."""
        if event.type == PROGRESS_EVENT:
            return not stale_progress(event, self._seqs.get(event.job_id, -1))
        last = self._seqs.pop(event.job_id, -1)
        self._seqs[event.job_id] = max(last, event.seq)
        if len(self._seqs) > SEEN_JOBS:
            del self._seqs[next(iter(self._seqs))]
        return event.seq > last


@dataclass
class LiveStreams:
    """What the stream routes need, created once at start-up."""

    engine: AsyncEngine
    names: Names
    hub: Hub
    feed: EventFeed | None = None  # None: events reach the hub some other way (tests publish to it)

    async def opening(self) -> None:
        """Before a stream answers: the feed's queue is bound, so an event published once the client has the
        answer reaches the stream. While the broker is unreachable the stream opens anyway, for its history."""
        if self.feed is not None:
            await self.feed.wanted(FEED_WAIT_SECONDS)

    async def visible_job(self, principal: Principal, job_id: str) -> JobRow | None:
        """The job, if the caller may see it."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(JOBS).where(JOBS.c.id == job_id, visible_to(JOBS, principal)))).first()
        return job_row(row._mapping) if row else None

    async def job(self, principal: Principal, job_id: str, last_event_id: str | None) -> AsyncIterator[LiveEvent]:
        """The job's current state (or, after `last_event_id`, what followed it), then each change until a
        terminal one."""
        with self.hub.subscribed(lambda event: event.job_id == job_id, principal.key_id) as subscription:
            job = await self.visible_job(principal, job_id)
            if job is None:
                return
            ref = parse_event_id(last_event_id)
            after = ref.seq if ref is not None and ref.job_id == job_id else None
            history = [as_event(self.names, job)] if after is None else await self._after(job, after)
            last = after if after is not None else -1
            for event in history:
                last = max(last, event.seq)
                yield event
            if job["status"] in TERMINAL:
                return
            async for event in _live(subscription):
                if event.type == PROGRESS_EVENT:
                    if not stale_progress(event, last):
                        yield event
                elif event.seq > last:
                    last = event.seq
                    yield event
                    if event.type in TERMINAL_TYPES:
                        return

    async def _after(self, job: JobRow, seq: int) -> list[LiveEvent]:
        return await job_events_after(self.engine, self.names, job, seq) if seq < job["seq"] else []

    async def events(
        self, principal: Principal, wanted: EventFilter, last_event_id: str | None
    ) -> AsyncIterator[LiveEvent]:
        """Every event of the caller's jobs that `wanted` admits: first those after `last_event_id` from the
        audit trail, then live."""
        sent = LastSeqs()

        def admitted(event: LiveEvent) -> bool:
            return sees(principal, event.client_id) and wanted.admits(event)

        with self.hub.subscribed(admitted, principal.key_id) as sub:
            ref = parse_event_id(last_event_id)
            if ref is not None:
                async for event in self._replay(principal, wanted, ref):
                    if sent.is_new(event):
                        yield event
            async for event in _live(sub):
                if sent.is_new(event):
                    yield event

    async def _replay(self, principal: Principal, wanted: EventFilter, ref: EventRef) -> AsyncIterator[LiveEvent]:
        async for page in events_after(self.engine, self.names, principal, ref, wanted.job_type):
            for event in page:
                if wanted.admits(event):
                    yield event


def stale_progress(event: LiveEvent, last_seq: int) -> bool:
    """Whether a progress event is older than the last status change sent of its job (one of a run that ended).
    A progress event is no status change: it carries its job's seq as it stands, and moves nothing on."""
    return event.seq < last_seq


async def _live(subscription: Subscription) -> AsyncIterator[LiveEvent]:
    while (event := await subscription.next()) is not None:
        yield event
