"""Sending one delivery again."""

from fastapi import APIRouter

from app.api.deps import PrincipalDep, StateDep
from app.api.errors import not_found
from app.schemas.webhook import DeliveryQueued

router = APIRouter(prefix="/api/v1/deliveries", tags=["webhooks"])


@router.post("/{delivery_id}/redeliver", status_code=202, response_model=DeliveryQueued)
async def redeliver(delivery_id: str, state: StateDep, principal: PrincipalDep) -> DeliveryQueued:
    """A new attempt (and a fresh retry schedule) with the same `webhook-id`, sent at once: an operator's action
    goes through the endpoint's open circuit as its probe, and a success closes the circuit."""
    if not await state.deliveries.redeliver(principal, ids=[delivery_id]):
        raise not_found("delivery")
    return DeliveryQueued(delivery_id=delivery_id)
