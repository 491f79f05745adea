"""What the dashboard needs beyond the other routes: who the key belongs to, and the broker's queue depths."""

from fastapi import APIRouter

from app.api.deps import AdminDep, PrincipalDep, StateDep
from app.api.errors import ApiError
from app.schemas.api_key import WhoAmIOut
from app.schemas.queue import QueuesOut
from app.services.upkeep.gauges import BrokerUnavailable, queue_depths

router = APIRouter(prefix="/api/v1", tags=["operations"])


@router.get("/me", response_model=WhoAmIOut, summary="The client the key belongs to")
async def who_am_i(principal: PrincipalDep) -> WhoAmIOut:
    """The key's `client_id`, and whether it is an admin key (which sees every client and the admin calls)."""
    return WhoAmIOut(client_id=principal.client_id, admin=principal.admin)


@router.get(
    "/queues",
    response_model=QueuesOut,
    summary="Ready messages and consumers of every queue",
    responses={
        403: {"description": "The key is not an admin key."},
        503: {"description": "The broker is unreachable, so no depth can be read."},
    },
)
async def list_queues(state: StateDep, _: AdminDep) -> QueuesOut:
    """Each lane, delay tier and dead-letter queue of the job and webhook topology, named without the namespace:
    the messages ready in it and the consumers reading it, read from the broker now; the retry tiers' messages
    added up per topology (`in_retry`); and how fast each depth changes between reads (with publish and deliver
    rates from the management API when RABBITMQ_MANAGEMENT_URL is set)."""
    try:
        depths = await queue_depths(state.resources)
    except BrokerUnavailable as exc:
        raise ApiError(503, "broker_unavailable", "RabbitMQ is unreachable, so queue depths cannot be read.") from exc
    return QueuesOut.model_validate(await state.queue_rates.describe(depths, state.resources.names.ns))
