"""The jobs API: submit one or a batch, read, list, audit trail."""

from typing import Annotated, Any

from asgi_correlation_id import correlation_id
from fastapi import APIRouter, Header, Query, Request, Response

from app.api.admission import (
    admit,
    batch_requests,
    batch_size,
    job_request,
    json_object,
    limited_then_admitted,
    rate_limit,
)
from app.api.deps import PAGE_SIZE, CursorQuery, LimitQuery, PrincipalDep, StateDep
from app.api.errors import ApiError, not_found
from app.api.job_filters import SEARCH_DESCRIPTION, JobSearchDep
from app.api.state import ApiState
from app.schemas.bulk import BulkIn, BulkOut
from app.schemas.job import (
    BATCH_REQUEST_SCHEMA,
    BatchItemOut,
    BatchOut,
    JobEventOut,
    JobOptions,
    JobOut,
    JobPage,
    Submitted,
)
from app.schemas.webhook import DeliveryOut
from app.services import job_bulk
from app.services.dlq import NotCancellable, NotDeadLettered
from app.services.jobs import IdempotencyConflict
from app.services.tenancy import Principal

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

IDEMPOTENCY_KEY_MAX = 255
SUBMIT_STATUS = {Submitted.CREATED: 201, Submitted.PENDING: 202, Submitted.EXISTING: 200}
WaitQuery = Annotated[
    float | None,
    Query(
        gt=0,
        le=60,
        allow_inf_nan=False,
        description="Seconds (0 < wait <= 60, fractions allowed) to hold the answer until the job is succeeded, "
        "dead_lettered or cancelled; then, or when the time is up, the job as it stands. Status codes stay the same.",
    ),
]
REQUEST_SCHEMA_REF = "#/components/schemas/JobRequest"


def _json_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@router.post(
    "",
    response_model=JobOut,
    status_code=201,
    openapi_extra=_json_body({"$ref": REQUEST_SCHEMA_REF}),
    responses={
        200: {
            "model": JobOut,
            "description": "The same request was sent before with this idempotency key, or the client's job with "
            "this unique key holds it: that job, nothing new.",
        },
        202: {"model": JobOut, "description": "Saved as `pending`; published once the broker is back."},
        409: {"description": "The idempotency key was used for a different request."},
        413: {"description": "The body is over the size limit."},
        422: {"description": "Unknown job type, bad payload or field, or a body that is not a JSON object."},
        429: {"description": "Over the client's rate limit; see Retry-After and X-RateLimit-*."},
        503: {"description": "The database is unreachable, or the job type's circuit is open; nothing was saved."},
    },
)
async def submit_job(
    request: Request,
    response: Response,
    state: StateDep,
    principal: PrincipalDep,
    idempotency_key: Annotated[str | None, Header(max_length=IDEMPOTENCY_KEY_MAX)] = None,
    wait: WaitQuery = None,
) -> JobOut:
    """Submit a job. Answers 201 once the broker confirmed it, 202 while the broker is unreachable; with `wait`,
    once the job is finished or the wait is over."""
    return await submit_one(request, response, state, principal, idempotency_key, wait)


async def submit_one(
    request: Request,
    response: Response,
    state: ApiState,
    principal: Principal,
    idempotency_key: str | None,
    wait: float | None,
) -> JobOut:
    """What `POST /api/v1/jobs` does once its parameters are read, for this route and for the fast path that
    serves it without FastAPI's per-request work (app/api/submit_path.py): the answer's status and headers go on
    `response`."""

    async def read() -> JobOptions:
        data = json_object(request)
        if idempotency_key and "idempotency_key" not in data:
            data["idempotency_key"] = idempotency_key
        return job_request(data)

    one = await limited_then_admitted(state, principal.client_id, response, read)
    try:
        job, outcome = await state.waiting.submit(principal, one, correlation_id.get(), wait)
    except IdempotencyConflict as exc:
        raise ApiError(
            409,
            "idempotency_conflict",
            f"Idempotency key {exc.key} was already used for a different request; use a new key for a new request.",
        ) from exc
    response.status_code = SUBMIT_STATUS[outcome]
    return JobOut.model_validate(job)


@router.post(
    "/batch",
    response_model=BatchOut,
    status_code=201,
    openapi_extra=_json_body(BATCH_REQUEST_SCHEMA),
    responses={
        409: {"description": "An item's idempotency key was used for a different request (`index` names it)."},
        413: {"description": "The body is over the batch size limit (`MAX_BATCH_BODY_BYTES`)."},
        422: {
            "description": "Empty, over 500 jobs, or an invalid item: each error's `loc` starts body.jobs.<index>; "
            "or more jobs than the client's whole rate limit (`batch_over_rate_limit`): split the batch."
        },
        429: {"description": "The batch would take the client over its rate limit now (every job counts)."},
        503: {"description": "The database is unreachable, or an item's job type has its circuit open."},
    },
)
async def submit_batch(request: Request, response: Response, state: StateDep, principal: PrincipalDep) -> BatchOut:
    """Submit 1-500 jobs at once, all or nothing: each item as in `POST /api/v1/jobs`, with its own
    `idempotency_key`. Answers 201 with every job in request order, each `created`, `pending` or `existing`."""
    data = json_object(request)
    await rate_limit(state, principal.client_id, response, batch_size(data))
    requests = batch_requests(data)
    await admit(state, requests, batch=True)
    try:
        placed = await state.jobs.submit_many(principal, requests, correlation_id.get())
    except IdempotencyConflict as exc:
        detail = (
            f"Item {exc.index}'s idempotency key {exc.key} was already used for a different request, so nothing "
            "in this batch was saved; give that item a new key, or send it as it was first sent."
        )
        raise ApiError(409, "idempotency_conflict", detail, index=exc.index) from exc
    return BatchOut(items=[BatchItemOut(outcome=outcome, job=JobOut.model_validate(job)) for job, outcome in placed])


@router.get("", response_model=JobPage, description=SEARCH_DESCRIPTION)
async def list_jobs(
    state: StateDep,
    principal: PrincipalDep,
    search: JobSearchDep,
    limit: LimitQuery = PAGE_SIZE,
    cursor: CursorQuery = None,
) -> JobPage:
    """List and search jobs, newest first."""
    rows, next_cursor = await state.jobs.page(principal, search, limit, cursor)
    return JobPage(items=[JobOut.model_validate(r) for r in rows], next_cursor=next_cursor)


@router.post("/bulk", response_model=BulkOut)
async def bulk_action(body: BulkIn, state: StateDep, principal: PrincipalDep) -> BulkOut:
    """Cancel or retry up to 500 jobs in one call: each job as `POST /api/v1/jobs/{id}/cancel` or `/retry` would
    treat it, in its own transaction, answering per job `cancelled`, `cancel_requested` (it was running),
    `replayed`, `not_found` (no such job of yours) or `conflict` (finished, or not dead-lettered) with its status."""
    return BulkOut(items=await job_bulk.apply(state.dlq, principal, body.action, body.job_ids))


@router.get("/{job_id}", response_model=JobOut, responses={404: {"description": "No such job for this client."}})
async def get_job(job_id: str, state: StateDep, principal: PrincipalDep, wait: WaitQuery = None) -> JobOut:
    """One job; with `wait`, once it is finished or the wait is over."""
    job = await state.waiting.get(principal, job_id, wait)
    if job is None:
        raise not_found("job")
    return JobOut.model_validate(job)


@router.get("/{job_id}/events", response_model=list[JobEventOut])
async def job_events(job_id: str, state: StateDep, principal: PrincipalDep) -> list[JobEventOut]:
    """The job's audit trail, oldest first."""
    events = await state.jobs.events(principal, job_id)
    if events is None:
        raise not_found("job")
    return [JobEventOut.model_validate(e) for e in events]


@router.get("/{job_id}/logs", response_model=list[DeliveryOut])
async def job_logs(job_id: str, state: StateDep, principal: PrincipalDep) -> list[DeliveryOut]:
    """Every webhook delivery of this job's events, each with every attempt."""
    rows = await state.deliveries.for_job(principal, job_id)
    if rows is None:
        raise not_found("job")
    return [DeliveryOut.model_validate(row) for row in rows]


@router.post(
    "/{job_id}/cancel",
    response_model=JobOut,
    responses={
        202: {"model": JobOut, "description": "Running: its handler is being stopped (`cancel_requested: true`)."},
        409: {"description": "Finished."},
    },
)
async def cancel_job(job_id: str, state: StateDep, principal: PrincipalDep, response: Response) -> JobOut:
    """A pending, scheduled, waiting, queued or retrying job is cancelled at once (200): it will not run. A running
    job answers 202: its handler is stopped and it ends `cancelled` within seconds, unless it finished first. A
    finished job answers 409."""
    try:
        cancel = await state.dlq.cancel(principal, job_id)
    except NotCancellable as exc:
        raise ApiError(409, "not_cancellable", f"The job cannot be cancelled: it is {exc}.") from exc
    if cancel is None:
        raise not_found("job")
    if cancel.requested:
        response.status_code = 202
    return JobOut.model_validate(cancel.job)


@router.post("/{job_id}/retry", response_model=JobOut, responses={409: {"description": "Not dead-lettered."}})
async def retry_job(job_id: str, state: StateDep, principal: PrincipalDep) -> JobOut:
    """Replay a dead-lettered job: its attempts start again and its old DLQ message will never run it."""
    try:
        job = await state.dlq.retry(principal, job_id)
    except NotDeadLettered as exc:
        raise ApiError(409, "not_dead_lettered", "Only a dead-lettered job can be retried.") from exc
    if job is None:
        raise not_found("job")
    return JobOut.model_validate(job)


@router.get(
    "/{job_id}/artifact",
    response_class=Response,
    responses={200: {"description": "The file the job made (a PDF, an image)."}, 404: {"description": "None."}},
)
async def job_artifact(job_id: str, state: StateDep, principal: PrincipalDep) -> Response:
    """The job's file, with its content type; 404 when the job made none (or is not yours)."""
    found = await state.artifacts.load(principal, job_id)
    if found is None:
        raise not_found("artifact for a job")
    meta, data = found
    disposition = f'attachment; filename="{meta["filename"]}"'
    return Response(data, media_type=meta["content_type"], headers={"Content-Disposition": disposition})
