"""The event catalogue: every event type a webhook receiver can get, with an example body."""

from fastapi import APIRouter

from app.api.deps import PrincipalDep, StateDep
from app.schemas.event_type import EventTypeOut
from app.services.event_catalogue import catalogue

router = APIRouter(prefix="/api/v1/event-types", tags=["webhooks"])


@router.get("", response_model=list[EventTypeOut])
async def list_event_types(state: StateDep, _: PrincipalDep) -> list[EventTypeOut]:
    """Every event type an endpoint may receive: when it is sent, whether an endpoint may subscribe to it (and
    gets it by default), and an example body made by the code that makes the real ones."""
    return [EventTypeOut.model_validate(kind, from_attributes=True) for kind in catalogue(state.resources.names)]
