"""How an error becomes an answer: only the database's own failures are `503 database_unavailable`; an OSError
raised anywhere else (a file, a folder, another service's socket) is a fault of ours, a 500 without Retry-After,
so no client retries it for ever and the log says no false "database unreachable"."""

import pytest
from fastapi import APIRouter

from app.main import create_app
from tests.conftest import ADMIN_KEY, make_settings
from tests.support import api_with

NOT_THE_DATABASE = [
    IsADirectoryError(21, "Is a directory", "/usr/share/zoneinfo/Europe"),
    FileNotFoundError(2, "No such file or directory", "/nowhere"),
    ConnectionRefusedError(111, "Connection refused"),
    TimeoutError("a call to another service timed out"),
]


@pytest.mark.parametrize("error", NOT_THE_DATABASE, ids=lambda error: type(error).__name__)
async def test_an_os_error_from_outside_the_database_is_a_500_not_a_503(error: OSError) -> None:
    router = APIRouter()

    @router.get("/api/v1/raises")
    async def raises() -> None:
        raise error

    app = create_app(make_settings())
    app.include_router(router)
    async with api_with(app, ADMIN_KEY) as api:
        answer = await api.client.get("/api/v1/raises")
    assert (answer.status_code, answer.json()["code"]) == (500, "internal_error")
    assert "Retry-After" not in answer.headers
