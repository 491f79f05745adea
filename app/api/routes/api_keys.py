"""API-key management (admin only)."""

from fastapi import APIRouter, Response

from app.api.deps import AdminDep, StateDep
from app.api.errors import invalid, not_found
from app.schemas.api_key import ApiKeyCreate, ApiKeyCreated, ApiKeyOut
from app.services.api_keys import ADMIN_CLIENT

router = APIRouter(prefix="/api/v1/api-keys", tags=["api keys"])


@router.post("", status_code=201, response_model=ApiKeyCreated)
async def create_api_key(body: ApiKeyCreate, state: StateDep, _: AdminDep) -> ApiKeyCreated:
    """Create a key for a client; the key is shown in this answer only. `client_id` `admin` is the admin's own
    client, for admin keys only."""
    if body.client_id == ADMIN_CLIENT and not body.admin:  # it would see every job the admin submitted
        msg = f"client_id {ADMIN_CLIENT!r} is the admin's own; give another, or make an admin key"
        raise invalid([{"type": "value_error", "loc": ["body", "client_id"], "msg": msg}])
    row, key = await state.keys.create(body.client_id, body.admin)
    return ApiKeyCreated(
        id=row["id"], client_id=row["client_id"], admin=row["admin"], api_key=key, created_at=row["created_at"]
    )


@router.get("", response_model=list[ApiKeyOut])
async def list_api_keys(state: StateDep, _: AdminDep) -> list[ApiKeyOut]:
    """Every key, newest first, without the keys themselves."""
    return [ApiKeyOut.model_validate(row) for row in await state.keys.list()]


@router.delete("/{key_id}", status_code=204)
async def revoke_api_key(key_id: str, state: StateDep, _: AdminDep) -> Response:
    """Revoke a key; it gets 401 from the next request on."""
    if not await state.keys.revoke(key_id):
        raise not_found("live API key")
    return Response(status_code=204)
