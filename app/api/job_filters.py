"""The jobs list's query: status, type, exact ids and keys, `q`, and `payload.<field>=<value>` parameters."""

from typing import Annotated, Any

from fastapi import Depends, Query, Request

from app.api.errors import ApiError
from app.core.statuses import JobStatus
from app.services.job_search import MAX_PAYLOAD_FILTERS, BadPayloadFilter, JobSearch, payload_filters

PAYLOAD_PREFIX = "payload"
VALUE_MAX = 255  # no id or key stored is longer


def _exact(what: str) -> Any:
    return Query(max_length=VALUE_MAX, description=f"Only the job(s) whose {what} is exactly this.")


SEARCH_DESCRIPTION = f"""The caller's jobs (an admin's: every client's), newest first, a page at a time; pass
`next_cursor` back, with the same filters, for the next page. Every filter given must match.

- `status`, `job_type`: as named.
- `id`, `request_id` (the `X-Request-ID` of the submit), `idempotency_key`, `unique_key` (the key of `unique`),
  `concurrency_key` (the key of `concurrency`): exact matches, each read through an index.
- `q`: one value matched exactly against all five of those (the dashboard's search box), also through the indexes.
- `payload.<field>=<value>` (up to {MAX_PAYLOAD_FILTERS}; nested fields as `payload.customer.id`): the field's value
  is that number or that string (`payload.order_id=123` finds `{{"order_id": 123}}` and `{{"order_id": "123"}}`).
  A field name other than plain names (letters, digits, `_`) is a `422`. No index serves a payload filter: it
  reads the caller's jobs newest first until it has found `limit` of them, so on its own it may read every one;
  combine it with an indexed filter (a key, `status` or `job_type`) when there are many.

An empty value is no filter."""


async def job_search(
    request: Request,
    status: JobStatus | None = None,
    job_type: str | None = None,
    job_id: Annotated[str | None, Query(alias="id", max_length=VALUE_MAX, description="The job's id.")] = None,
    request_id: Annotated[str | None, _exact("request id")] = None,
    idempotency_key: Annotated[str | None, _exact("idempotency key")] = None,
    unique_key: Annotated[str | None, _exact("unique key")] = None,
    concurrency_key: Annotated[str | None, _exact("concurrency key")] = None,
    q: Annotated[
        str | None,
        Query(max_length=VALUE_MAX, description="Matches the id, request id or any key of a job exactly."),
    ] = None,
) -> JobSearch:
    """The list's filters; a bad `payload.*` parameter is a 422 that says how to write one."""
    keys = {
        "id": job_id,
        "request_id": request_id,
        "idempotency_key": idempotency_key,
        "unique_key": unique_key,
        "concurrency_key": concurrency_key,
    }
    pairs = [
        (name, value)
        for name, value in request.query_params.multi_items()
        if name == PAYLOAD_PREFIX or name.startswith(PAYLOAD_PREFIX + ".")
    ]
    try:
        payload = payload_filters(pairs)
    except BadPayloadFilter as exc:
        raise ApiError(422, "bad_payload_filter", str(exc)) from exc
    if any(len(f.value) > VALUE_MAX for f in payload):
        raise ApiError(422, "bad_payload_filter", f"A payload filter's value is over {VALUE_MAX} characters.")
    found = {name: value for name, value in keys.items() if value}
    return JobSearch(status=status, job_type=job_type or None, keys=found, q=q or None, payload=payload)


JobSearchDep = Annotated[JobSearch, Depends(job_search)]
