"""Webhook endpoints: register, read, change, delete, rotate, test, deliveries, recover; the default secret."""

from typing import Annotated, Any

from asgi_correlation_id import correlation_id
from fastapi import APIRouter, Query, Response

from app.api.deps import PrincipalDep, StateDep
from app.api.errors import not_found
from app.schemas.webhook import (
    DeliveryOut,
    DeliveryQueued,
    RecoverIn,
    RecoverOut,
    SecretOut,
    WebhookCreate,
    WebhookCreated,
    WebhookOut,
    WebhookUpdate,
)

router = APIRouter(prefix="/api/v1/webhooks", tags=["webhooks"])
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


@router.get("/{webhook_id}/deliveries", response_model=list[DeliveryOut])
async def list_deliveries(
    webhook_id: str,
    state: StateDep,
    principal: PrincipalDep,
    status: Annotated[str | None, Query(pattern="^(pending|succeeded|failed)$")] = None,
) -> list[DeliveryOut]:
    """The endpoint's deliveries, oldest first, each with every attempt."""
    if await state.webhooks.get(principal, webhook_id) is None:
        raise not_found("webhook")
    rows = await state.deliveries.for_endpoint(principal, webhook_id, status)
    return [DeliveryOut.model_validate(row) for row in rows]


@router.post("/{webhook_id}/recover", status_code=202, response_model=RecoverOut)
async def recover(webhook_id: str, body: RecoverIn, state: StateDep, principal: PrincipalDep) -> RecoverOut:
    """Send again, at once and even through an open circuit, every failed delivery to this endpoint created
    since `since` (same `webhook-id`s)."""
    if await state.webhooks.get(principal, webhook_id) is None:
        raise not_found("webhook")
    ids = await state.deliveries.redeliver(principal, endpoint_id=webhook_id, failed_since=body.since)
    return RecoverOut(recovered=len(ids), delivery_ids=ids)
