"""Webhook endpoints: register, read (never the secret), change, delete, rotate; the client's default secret."""

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.messages import delivery_id, dumps, webhook_test_event
from app.core.names import TEST_EVENT, Names
from app.core.secret_box import SecretBox
from app.core.signing import new_secret
from app.core.ssrf import Resolver, resolve
from app.models.rows import EndpointRow
from app.models.types import utcnow
from app.services.deliveries import DeliveryService
from app.services.outbox import Outbox
from app.services.tenancy import Principal
from app.stores.deliveries import DeliveryStore, Fanned, Target
from app.stores.deliveries.secrets import client_secret
from app.stores.endpoints import EndpointStore

ROTATION_OVERLAP = timedelta(hours=24)


@dataclass(frozen=True)
class WebhookService:
    engine: AsyncEngine  # for the transactions shared with the deliveries store (a test event, a default secret)
    endpoints: EndpointStore
    outbox: Outbox
    names: Names
    box: SecretBox
    allow_private: bool
    deliveries: DeliveryStore
    delivery_service: DeliveryService | None = None
    resolver: Resolver | None = None  # the system's own when None

    async def check_url(self, url: str) -> None:
        """Refuse a URL that is not http(s) or resolves to a non-public address (unless allowed)."""
        await resolve(url, self.allow_private, self.resolver)

    async def create(self, principal: Principal, fields: dict[str, Any]) -> tuple[EndpointRow, str]:
        """Register an endpoint; its secret is returned this once."""
        await self.check_url(fields["url"])
        secret = new_secret()
        now = utcnow()
        row: dict[str, Any] = {
            **fields,
            "id": str(uuid.uuid4()),
            "client_id": principal.client_id,
            "active": True,
            "disabled_reason": None,
            "secret": self.box.seal(secret),
            "previous_secret": None,
            "previous_expires_at": None,
            "created_at": now,
            "updated_at": now,
            "deleted_at": None,
        }
        endpoint = cast(EndpointRow, row)  # the request's fields complete the row
        await self.endpoints.add(endpoint)
        return endpoint, secret

    async def list(self, principal: Principal) -> list[EndpointRow]:
        return await self.endpoints.live(principal.scope)

    async def get(self, principal: Principal, endpoint_id: str) -> EndpointRow | None:
        return await self.endpoints.get(endpoint_id, principal.scope)

    async def update(self, principal: Principal, endpoint_id: str, changes: dict[str, Any]) -> EndpointRow | None:
        """Change an endpoint. Re-enabling it is an operator's word that it works again: its pending deliveries
        go out at once, through an open circuit if need be, and the first success closes it."""
        if "url" in changes:
            await self.check_url(changes["url"])
        enabled = changes.get("active") is True
        if enabled:
            changes = {**changes, "disabled_reason": None, "failing_since": None}
        endpoint = await self.endpoints.change(endpoint_id, principal.scope, changes)
        if endpoint is not None and enabled and self.delivery_service is not None:
            await self.delivery_service.redeliver(principal, endpoint_id=endpoint_id, pending=True)
        return endpoint

    async def delete(self, principal: Principal, endpoint_id: str) -> bool:
        """Soft-delete: deliveries keep their history; nothing more is sent to it."""
        deleted = {"deleted_at": utcnow(), "active": False}
        return await self.endpoints.update_live(endpoint_id, principal.scope, deleted)

    async def rotate(self, principal: Principal, endpoint_id: str) -> str | None:
        """A new secret; the old one keeps signing beside it for 24 hours."""
        endpoint = await self.endpoints.get(endpoint_id, principal.scope)
        if endpoint is None:
            return None
        secret = new_secret()
        rotated = {
            "secret": self.box.seal(secret),
            "previous_secret": endpoint["secret"],
            "previous_expires_at": utcnow() + ROTATION_OVERLAP,
        }
        await self.endpoints.update_live(endpoint_id, principal.scope, rotated)
        return secret

    async def default_secret(self, principal: Principal) -> str:
        """The secret that signs this client's callback_url deliveries, created on first use."""
        async with self.engine.begin() as conn:
            return await client_secret(conn, self.box, principal.client_id)

    async def send_test(self, principal: Principal, endpoint_id: str, request_id: str | None) -> str | None:
        """Queue a `webhook.test` event for the endpoint now; return the delivery id."""
        async with self.engine.begin() as conn:
            endpoint = await self.endpoints.read(conn, endpoint_id, principal.scope)
            if endpoint is None:
                return None
            event_id = f"evt_test_{uuid.uuid4().hex}"
            body = dumps(webhook_test_event(event_id, endpoint_id, utcnow()))
            target = Target(endpoint_id, endpoint["url"], endpoint_id)
            fanned = Fanned(event_id, TEST_EVENT, endpoint["client_id"], None, body, [target], request_id)
            [staged] = await self.deliveries.stage(conn, [fanned])
        await self.outbox.publish(staged)
        return delivery_id(event_id, endpoint_id)
