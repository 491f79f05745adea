"""The jobs API: submit, read, list, audit trail."""

import json
import math
from typing import Annotated, Any

from asgi_correlation_id import correlation_id
from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import ValidationError

from app.api.deps import PrincipalDep, StateDep
from app.api.errors import ApiError, not_found, validation_errors
from app.api.state import ApiState
from app.core.statuses import JobStatus
from app.schemas.job import JOB_REQUEST, JobEventOut, JobOut, JobPage
from app.schemas.webhook import DeliveryOut
from app.services.breakers import BreakerState
from app.services.dlq import NotCancellable, NotDeadLettered
from app.services.jobs import IdempotencyConflict, Submitted
from app.services.pagination import BadCursor, encode

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])

SUBMIT_STATUS = {Submitted.CREATED: 201, Submitted.PENDING: 202, Submitted.EXISTING: 200}
REQUEST_SCHEMA_REF = "#/components/schemas/JobRequest"


@router.post(
    "",
    response_model=JobOut,
    status_code=201,
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": REQUEST_SCHEMA_REF}}}}
    },
    responses={
        200: {"model": JobOut, "description": "The same request was sent before with this idempotency key."},
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
    idempotency_key: Annotated[str | None, Header(max_length=255)] = None,
) -> JobOut:
    """Submit a job. Answers 201 once the broker confirmed it, 202 while the broker is unreachable."""
    await _rate_limit(state, principal.client_id, response)
    data = await _json_object(request, state.resources.settings.max_body_bytes)
    if idempotency_key and "idempotency_key" not in data:
        data["idempotency_key"] = idempotency_key
    try:
        job_request = JOB_REQUEST.validate_python(data)
    except ValidationError as exc:
        raise validation_errors(list(exc.errors())) from exc
    circuit = await state.breakers.check(job_request.job_type)
    if circuit.state is BreakerState.OPEN:
        retry_after = str(max(1, math.ceil(circuit.retry_after)))
        detail = f"Jobs of type {job_request.job_type} are failing; their circuit is open. Retry in {retry_after} s."
        raise ApiError(503, "circuit_open", detail, headers={"Retry-After": retry_after})
    if job_request.callback_url:
        await state.webhooks.check_url(job_request.callback_url)  # the SSRF guard, before anything is saved
    try:
        job, outcome = await state.jobs.submit(principal, job_request, correlation_id.get())
    except IdempotencyConflict as exc:
        raise ApiError(
            409, "idempotency_conflict", f"Idempotency key {exc} was already used for a different request."
        ) from exc
    response.status_code = SUBMIT_STATUS[outcome]
    return JobOut.model_validate(job)


async def _rate_limit(state: ApiState, client_id: str, response: Response) -> None:
    """Every submit counts against the client's window; over it, 429 (Redis down: no limit, fail open)."""
    decision = await state.limiter.check(client_id)
    if decision is None:
        return
    if not decision.allowed:
        detail = f"Over the limit of {decision.limit} job submissions per minute; retry after the Retry-After seconds."
        raise ApiError(429, "rate_limited", detail, headers=decision.headers())
    response.headers.update(decision.headers())


async def _json_object(request: Request, limit: int) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large(limit)
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ApiError(422, "invalid_json", f"The body is not valid JSON: {exc}.") from exc
    if not isinstance(data, dict):
        raise ApiError(422, "not_an_object", "The body must be a JSON object.")
    return data


def _too_large(limit: int) -> ApiError:
    return ApiError(413, "body_too_large", f"The body is over the limit of {limit} bytes.")


@router.get("", response_model=JobPage)
async def list_jobs(
    state: StateDep,
    principal: PrincipalDep,
    status: JobStatus | None = None,
    job_type: str | None = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: str | None = None,
) -> JobPage:
    """The caller's jobs, newest first, a page at a time; pass `next_cursor` back for the next page."""
    try:
        rows, last = await state.jobs.page(principal, status, job_type, limit, cursor)
    except BadCursor as exc:
        raise ApiError(422, "bad_cursor", str(exc)) from exc
    next_cursor = encode(last["created_at"], last["id"]) if last else None
    return JobPage(items=[JobOut.model_validate(r) for r in rows], next_cursor=next_cursor)


@router.get("/{job_id}", response_model=JobOut, responses={404: {"description": "No such job for this client."}})
async def get_job(job_id: str, state: StateDep, principal: PrincipalDep) -> JobOut:
    """One job."""
    job = await state.jobs.get(principal, job_id)
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


@router.post("/{job_id}/cancel", response_model=JobOut, responses={409: {"description": "Running or finished."}})
async def cancel_job(job_id: str, state: StateDep, principal: PrincipalDep) -> JobOut:
    """A pending, queued or retrying job will not run; anything else answers 409."""
    try:
        job = await state.dlq.cancel(principal, job_id)
    except NotCancellable as exc:
        raise ApiError(409, "not_cancellable", f"The job cannot be cancelled: it is {exc}.") from exc
    if job is None:
        raise not_found("job")
    return JobOut.model_validate(job)


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
