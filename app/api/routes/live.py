"""Live status over Server-Sent Events: one job's changes, and every event of the caller's jobs."""

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from sse_starlette import EventSourceResponse, ServerSentEvent

from app.api.deps import PrincipalDep, StateDep
from app.api.errors import ApiError, not_found
from app.api.state import ApiState
from app.services.live import LiveEvent
from app.services.streams import EventFilter, UnknownEventType

router = APIRouter(prefix="/api/v1", tags=["live status"])

MESSAGE = (
    "Each message is one job event: `id:` its id, `event:` its type (`job.queued`, `job.running`, "
    "`job.succeeded`, ...), `data:` its JSON as a webhook receives it. A comment line keeps an idle stream open "
    "(at least every 15 s). A client that reads too slowly is disconnected; reconnecting with `Last-Event-ID` "
    "resumes after the last event it got."
)
STREAM: dict[int | str, dict[str, Any]] = {
    200: {"description": "A `text/event-stream`.", "content": {"text/event-stream": {"schema": {"type": "string"}}}}
}
LastEventId = Annotated[
    str | None, Header(max_length=128, description="The `id` of the last event received, sent by EventSource.")
]


def _stream(state: ApiState, events: AsyncIterator[LiveEvent]) -> EventSourceResponse:
    async def messages() -> AsyncIterator[ServerSentEvent]:
        async for event in events:
            yield ServerSentEvent(event.data, event=event.type, id=event.id)

    return EventSourceResponse(messages(), ping=state.resources.settings.live_ping_seconds)


@router.get(
    "/jobs/{job_id}/stream",
    response_class=EventSourceResponse,
    responses={**STREAM, 404: {"description": "No such job for this client."}},
    description=(
        "The job's live status: first its current state (`event: job.<status>`), then one event per status change; "
        "the stream ends after a terminal status (succeeded, dead_lettered, cancelled). With `Last-Event-ID` "
        f"naming one of this job's events, the events after it come first instead of the current state. {MESSAGE}"
    ),
)
async def job_stream(
    job_id: str, state: StateDep, principal: PrincipalDep, last_event_id: LastEventId = None
) -> EventSourceResponse:
    """One job's status, live."""
    if await state.live.visible_job(principal, job_id) is None:
        raise not_found("job")
    await state.live.opening()
    return _stream(state, state.live.job(principal, job_id, last_event_id))


@router.get(
    "/events/stream",
    response_class=EventSourceResponse,
    responses={**STREAM, 422: {"description": "`types` names something that is not a job event type."}},
    description=(
        "Every event of the caller's jobs (an admin's: every job's), as it happens. With `Last-Event-ID`, what "
        f"followed that event is replayed from the audit trail first, then the stream goes live. {MESSAGE}"
    ),
)
async def events_stream(
    state: StateDep,
    principal: PrincipalDep,
    job_type: Annotated[str | None, Query(description="Only jobs of this type.")] = None,
    types: Annotated[
        str | None, Query(description="Only these event types, comma-separated: `job.succeeded,job.dead_lettered`.")
    ] = None,
    last_event_id: LastEventId = None,
) -> EventSourceResponse:
    """Job events, live."""
    try:
        wanted = EventFilter.parse(job_type, types)
    except UnknownEventType as exc:
        raise ApiError(422, "unknown_event_type", f"Not a job event type: {exc}.") from exc
    await state.live.opening()
    return _stream(state, state.live.events(principal, wanted, last_event_id))
