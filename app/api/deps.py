"""Dependencies routes declare: the state, and who is calling."""

from typing import Annotated

from fastapi import Depends, Query, Request

from app.api.errors import ApiError
from app.api.state import ApiState
from app.services.tenancy import Principal

PRINCIPAL_SCOPE_KEY = "app.principal"  # the caller, once app/api/request_body.py has checked the key


async def get_state(request: Request) -> ApiState:
    """The process's API state; async, so FastAPI does not hop to a thread for it on every request."""
    state: ApiState = request.app.state.api
    return state


StateDep = Annotated[ApiState, Depends(get_state)]


async def get_principal(request: Request) -> Principal:
    """The caller, from their bearer key; 401 for a missing, unknown or revoked key.

    It reads the header itself, with no dependencies of its own: every authenticated request comes through here,
    and FastAPI's solving of the bearer scheme and the state as sub-dependencies cost 6-10 % of a submit's CPU.
    app/api/openapi.py declares the scheme on every operation that needs this instead."""
    known: Principal | None = request.scope.get(PRINCIPAL_SCOPE_KEY)
    if known is not None:
        return known
    scheme, _, key = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not key:
        raise _unauthorized("No API key sent; send `Authorization: Bearer <api key>`.")
    state = await get_state(request)
    principal = await state.keys.authenticate(key)
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

# How many rows a list's page holds: PAGE_SIZE unless asked, 200 at the most (CONTRACT).
LimitQuery = Annotated[int, Query(ge=1, le=200)]
PAGE_SIZE = 50

# A list's page after the first: the `next_cursor` that list handed out, as it came; any other is a 422 bad_cursor.
CursorQuery = Annotated[
    str | None,
    Query(description="The `next_cursor` of this list's previous page; any other cursor is a 422 `bad_cursor`."),
]
