"""What a submit passes before anything is saved: the rate limit, the body's size and shape, each job's fields,
its job type's circuit and its callback URL's SSRF check. Each refusal is an ApiError saying what to do."""

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fastapi import Request, Response
from pydantic import ValidationError

from app.api.errors import ApiError, clean_errors, invalid, validation_errors
from app.api.request_body import parsed
from app.api.state import ApiState
from app.core import metrics
from app.core.breaker import BreakerState
from app.core.ssrf import UnsafeURL
from app.schemas.job import JOB_REQUEST, MAX_BATCH_JOBS, BatchEnvelope, JobOptions
from app.schemas.payloads.registry import PAYLOADS
from app.services.rate_limit import Decision


async def rate_limit(state: ApiState, client_id: str, response: Response, jobs: int = 1) -> None:
    """Every job counts against the client's window, all or none; over it, 429 (Redis down: no limit, fail open).
    A batch bigger than the whole limit is a 422: no wait would let it through."""
    if jobs > state.limiter.per_minute:
        raise _never_fits(jobs, state.limiter.per_minute)
    decision = await state.limiter.check(client_id, jobs)
    if decision is None:
        return
    if not decision.allowed:
        metrics.rate_limited(client_id).inc()
        raise ApiError(429, "rate_limited", _over_limit(decision, jobs), headers=decision.headers())
    response.headers.update(decision.headers())


def _never_fits(jobs: int, per_minute: int) -> ApiError:
    detail = (
        f"A batch of {jobs} jobs is over the limit of {per_minute} job submissions per minute on its own, so it can "
        f"never be accepted and nothing was saved; split it into batches of at most {per_minute}."
    )
    errors = [{"type": "batch_over_rate_limit", "loc": ["body", "jobs"], "msg": detail}]
    return ApiError(422, "batch_over_rate_limit", detail, errors=errors)


def _over_limit(decision: Decision, jobs: int) -> str:
    limit = f"the limit of {decision.limit} job submissions per minute"
    if jobs > 1:
        return (
            f"A batch of {jobs} jobs would go over {limit} ({decision.remaining} left now); nothing was saved. "
            "Retry after the Retry-After seconds, or send fewer jobs."
        )
    return f"Over {limit}; retry after the Retry-After seconds."


def json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object, as app/api/request_body.py read and bounded it (422 when it is no object)."""
    data = parsed(request)
    if not isinstance(data, dict):
        raise ApiError(422, "not_an_object", "The body must be a JSON object.")
    return data


def job_request(data: dict[str, Any]) -> JobOptions:
    """One job request, checked against its job type's model."""
    try:
        return JOB_REQUEST.validate_python(data)
    except ValidationError as exc:
        raise validation_errors(list(exc.errors())) from exc


def batch_size(data: dict[str, Any]) -> int:
    """How many jobs a batch body asks for, as the rate limit counts them (a malformed batch counts as one)."""
    jobs = data.get("jobs")
    return len(jobs) if isinstance(jobs, list) and 0 < len(jobs) <= MAX_BATCH_JOBS else 1


def batch_requests(data: dict[str, Any]) -> list[JobOptions]:
    """Every item of a batch, each checked on its own; one 422 names every bad field of every item."""
    try:
        envelope = BatchEnvelope.model_validate(data)
    except ValidationError as exc:
        raise validation_errors(list(exc.errors())) from exc
    requests: list[JobOptions] = []
    errors: list[dict[str, Any]] = []
    for index, item in enumerate(envelope.jobs):
        try:
            requests.append(JOB_REQUEST.validate_python(item))
        except ValidationError as exc:
            errors += clean_errors(list(exc.errors()), ("body", "jobs", index))
    if errors:
        raise invalid(errors)
    return requests


async def limited_then_admitted(
    state: ApiState, client_id: str, response: Response, read: Callable[[], Awaitable[JobOptions]]
) -> JobOptions:
    """One job's request read by `read`, counted against the client's rate limit and admitted, answering as
    `rate_limit`, then reading, then `admit` would one after the other (a 429 before a bad body, a bad body
    before a 503), with the limit and the job type's circuit asked in one Redis round trip."""
    try:
        one = await read()
    except ApiError:
        await rate_limit(state, client_id, response)
        raise
    limit, circuits = await asyncio.gather(
        rate_limit(state, client_id, response), _circuits_closed(state, [one], False), return_exceptions=True
    )
    for outcome in (limit, circuits):
        if isinstance(outcome, BaseException):
            raise outcome
    await urls_safe(state, [one])
    return one


async def admit(state: ApiState, requests: Sequence[JobOptions], batch: bool = False) -> None:
    """Refuse the whole request if any job type's circuit is open (503) or a URL a job will call is unsafe (422)."""
    await _circuits_closed(state, requests, batch)
    await urls_safe(state, requests, batch)


async def _circuits_closed(state: ApiState, requests: Sequence[JobOptions], batch: bool) -> None:
    job_types = list(dict.fromkeys(request.job_type for request in requests))
    circuits = await asyncio.gather(*(state.breakers.check(job_type) for job_type in job_types))
    opened = [circuit for circuit in circuits if circuit.state is BreakerState.OPEN]
    if not opened:
        return
    retry_after = str(max(1, math.ceil(max(circuit.retry_after for circuit in opened))))
    names = ", ".join(circuit.job_type for circuit in opened)
    detail = f"Jobs of type {names} are failing; their circuit is open. Retry in {retry_after} s."
    if batch:
        detail = (
            f"Jobs of type {names} are failing; their circuit is open, so nothing in this batch was saved. "
            f"Retry in {retry_after} s, or send the batch without them."
        )
    job_type_list = [circuit.job_type for circuit in opened]
    raise ApiError(503, "circuit_open", detail, headers={"Retry-After": retry_after}, job_types=job_type_list)


Located = tuple[list[str | int], str]  # a URL and the field that holds it


def _urls(request: JobOptions) -> list[Located]:
    """Each URL the job will call: its callback_url and its payload's."""
    found: list[Located] = [(["callback_url"], request.callback_url)] if request.callback_url else []
    payload_urls = PAYLOADS[request.job_type].urls(request.payload)
    return found + [(["payload", name], url) for name, url in payload_urls.items()]


async def urls_safe(state: ApiState, requests: Sequence[JobOptions], batch: bool = False) -> None:
    """The SSRF guard on each distinct URL the jobs will call, before anything is saved."""
    first_use: dict[str, tuple[int, list[str | int]]] = {}
    for index, request in enumerate(requests):
        for field, url in _urls(request):
            first_use.setdefault(url, (index, field))
    checks = await asyncio.gather(*(state.webhooks.check_url(url) for url in first_use), return_exceptions=True)
    for (index, field), outcome in zip(first_use.values(), checks, strict=True):
        if isinstance(outcome, UnsafeURL) and batch:
            loc = ["body", "jobs", index, *field]
            errors = [{"type": "unsafe_url", "loc": loc, "msg": str(outcome)}]
            raise ApiError(422, "unsafe_url", f"Item {index}: {outcome}", index=index, errors=errors)
        if isinstance(outcome, BaseException):
            raise outcome


async def edited_payload(state: ApiState, job_type: str, payload: Any) -> Any:
    """A dead job's new payload checked as a submit of its job type checks one: its JSON as it will be stored,
    or a 422 with each `loc` under body.payload (and an unsafe URL it would call refused)."""
    if job_type not in PAYLOADS:
        detail = (
            f"No job type {job_type!r} is installed here, so a new payload for it cannot be checked; install it, "
            "or replay the job without a payload."
        )
        raise ApiError(422, "unknown_job_type", detail)
    request = job_request({"job_type": job_type, "payload": payload})
    await urls_safe(state, [request])
    return request.payload.model_dump(mode="json")
