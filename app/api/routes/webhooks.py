"""Webhook endpoints: register, read, change, delete, rotate, test, deliveries, stats, recover; the default
secret."""

from typing import Annotated, Any, Literal

from asgi_correlation_id import correlation_id
from fastapi import APIRouter, Query, Request, Response
from pydantic import AwareDatetime

from app.api.deps import PAGE_SIZE, CursorQuery, PrincipalDep, StateDep
from app.api.errors import ApiError, not_found
from app.schemas.webhook import (
    DeliveredEvent,
    DeliveryOut,
    DeliveryQueued,
    DeliveryStatusName,
    RecoverIn,
    RecoverOut,
    SecretOut,
    WebhookCreate,
    WebhookCreated,
    WebhookOut,
    WebhookStatsOut,
    WebhookUpdate,
)
from app.services.deliveries import DeliveryFilters

router = APIRouter(prefix="/api/v1/webhooks", tags=["webhooks"])
BAD_FILTER: dict[int | str, dict[str, Any]] = {
    422: {"description": "A filter value that is not one of its kind, `since` not before `until`, or a bad cursor."}
}
PAGED = "A page of at most this many, newest first (without it: every delivery, oldest first)."
UNSAFE: dict[int | str, dict[str, Any]] = {
    422: {"description": "Bad field, unknown event type, or a URL that is not http(s) or not public."}
}


@router.post("", status_code=201, response_model=WebhookCreated, responses=UNSAFE)
async def create_webhook(body: WebhookCreate, state: StateDep, principal: PrincipalDep) -> WebhookCreated:
    """Register an endpoint. Its `secret` is in this answer only."""
    row, secret = await state.webhooks.create(principal, body.model_dump())
    return WebhookCreated.model_validate({**row, "secret": secret})


@router.get("", response_model=list[WebhookOut])
async def list_webhooks(state: StateDep, principal: PrincipalDep) -> list[WebhookOut]:
    return [WebhookOut.model_validate(row) for row in await state.webhooks.list(principal)]


@router.get("/default-secret", response_model=SecretOut)
async def default_secret(state: StateDep, principal: PrincipalDep) -> SecretOut:
    """The secret that signs deliveries to your jobs' `callback_url`; created on first use."""
    return SecretOut(secret=await state.webhooks.default_secret(principal))


@router.get("/{webhook_id}", response_model=WebhookOut)
async def get_webhook(webhook_id: str, state: StateDep, principal: PrincipalDep) -> WebhookOut:
    row = await state.webhooks.get(principal, webhook_id)
    if row is None:
        raise not_found("webhook")
    return WebhookOut.model_validate(row)


@router.patch("/{webhook_id}", response_model=WebhookOut, responses=UNSAFE)
async def update_webhook(webhook_id: str, body: WebhookUpdate, state: StateDep, principal: PrincipalDep) -> WebhookOut:
    """Change the URL, events, description, or switch it on or off (`active`). Switching it on sends its
    pending deliveries at once, even through an open circuit (a success closes it)."""
    row = await state.webhooks.update(principal, webhook_id, body.model_dump(exclude_unset=True))
    if row is None:
        raise not_found("webhook")
    return WebhookOut.model_validate(row)


@router.delete("/{webhook_id}", status_code=204)
async def delete_webhook(webhook_id: str, state: StateDep, principal: PrincipalDep) -> Response:
    """Nothing more is sent to it; its delivery history stays readable through the job logs."""
    if not await state.webhooks.delete(principal, webhook_id):
        raise not_found("webhook")
    return Response(status_code=204)


@router.post("/{webhook_id}/rotate-secret", response_model=SecretOut)
async def rotate_secret(webhook_id: str, state: StateDep, principal: PrincipalDep) -> SecretOut:
    """A new secret; for 24 hours deliveries carry signatures with both the old and the new one."""
    secret = await state.webhooks.rotate(principal, webhook_id)
    if secret is None:
        raise not_found("webhook")
    return SecretOut(secret=secret)


@router.post("/{webhook_id}/test", status_code=202, response_model=DeliveryQueued)
async def send_test(webhook_id: str, state: StateDep, principal: PrincipalDep) -> DeliveryQueued:
    """Send a `webhook.test` event to the endpoint now."""
    delivery_id = await state.webhooks.send_test(principal, webhook_id, correlation_id.get())
    if delivery_id is None:
        raise not_found("webhook")
    return DeliveryQueued(delivery_id=delivery_id)


@router.get("/{webhook_id}/deliveries", response_model=list[DeliveryOut], responses=BAD_FILTER)
async def list_deliveries(
    webhook_id: str,
    request: Request,
    response: Response,
    state: StateDep,
    principal: PrincipalDep,
    status: Annotated[DeliveryStatusName | None, Query(description="Only deliveries in this status.")] = None,
    event_type: Annotated[DeliveredEvent | None, Query(description="Only deliveries of this event type.")] = None,
    since: Annotated[AwareDatetime | None, Query(description="Only deliveries made at or after this time.")] = None,
    until: Annotated[AwareDatetime | None, Query(description="Only deliveries made before this time.")] = None,
    limit: Annotated[int | None, Query(ge=1, le=200, description=PAGED)] = None,
    cursor: CursorQuery = None,
) -> list[DeliveryOut]:
    """The endpoint's deliveries, each with every attempt: all of them oldest first; or, with `limit` (or a
    `cursor`), a page newest first, the next page's URL in the `Link` header (`rel="next"`) when more may follow."""
    if since and until and since >= until:
        raise ApiError(422, "bad_filter", "`since` must be before `until`; widen the time range or drop a bound.")
    if await state.webhooks.get(principal, webhook_id) is None:
        raise not_found("webhook")
    page = PAGE_SIZE if cursor and limit is None else limit
    filters = DeliveryFilters(status, event_type, since, until, page, cursor)
    rows, next_cursor = await state.deliveries.for_endpoint(principal, webhook_id, filters)
    if next_cursor:
        following = request.url.include_query_params(cursor=next_cursor, limit=page)
        response.headers["Link"] = f'<{following.path}?{following.query}>; rel="next"'
    return [DeliveryOut.model_validate(row) for row in rows]


@router.get("/{webhook_id}/stats", response_model=WebhookStatsOut)
async def webhook_stats(
    webhook_id: str,
    state: StateDep,
    principal: PrincipalDep,
    window: Annotated[Literal["1h", "24h"], Query(description="The last hour or the last day.")] = "1h",
) -> WebhookStatsOut:
    """The endpoint's health: its deliveries made in the window by status, their attempts' success rate, p50/p95
    latency and last error; its circuit and its deliveries in flight now."""
    if await state.webhooks.get(principal, webhook_id) is None:
        raise not_found("webhook")
    return WebhookStatsOut.model_validate(await state.webhook_stats.of(webhook_id, window))


@router.post("/{webhook_id}/recover", status_code=202, response_model=RecoverOut)
async def recover(webhook_id: str, body: RecoverIn, state: StateDep, principal: PrincipalDep) -> RecoverOut:
    """Send again, at once and even through an open circuit, every failed delivery to this endpoint created
    since `since` (same `webhook-id`s)."""
    if await state.webhooks.get(principal, webhook_id) is None:
        raise not_found("webhook")
    ids = await state.deliveries.redeliver(principal, endpoint_id=webhook_id, failed_since=body.since)
    return RecoverOut(recovered=len(ids), delivery_ids=ids)
