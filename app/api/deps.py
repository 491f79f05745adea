"""Dependencies routes declare: the state, and who is calling."""

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.api.errors import ApiError
from app.api.state import ApiState
from app.services.tenancy import Principal

bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>`.")


async def get_state(request: Request) -> ApiState:
    """The process's API state; async, so FastAPI does not hop to a thread for it on every request."""
    state: ApiState = request.app.state.api
    return state


StateDep = Annotated[ApiState, Depends(get_state)]


async def get_principal(
    state: StateDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    """The caller, from their bearer key; 401 for a missing, unknown or revoked key."""
    if credentials is None or not credentials.credentials:
        raise _unauthorized("No API key sent; send `Authorization: Bearer <api key>`.")
    principal = await state.keys.authenticate(credentials.credentials)
    if principal is None:
        raise _unauthorized("That API key is unknown or revoked.")
    return principal


def _unauthorized(detail: str) -> ApiError:
    return ApiError(401, "unauthorized", detail, headers={"WWW-Authenticate": "Bearer"})


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def get_admin(principal: PrincipalDep) -> Principal:
    if not principal.admin:
        raise ApiError(403, "forbidden", "This call needs an admin API key.")
    return principal


AdminDep = Annotated[Principal, Depends(get_admin)]
