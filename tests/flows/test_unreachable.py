"""Which database errors mean "the database is not reachable" (retry the message later) rather than "this item
is bad" (fail it alone): a job whose result could not be stored because PostgreSQL was restarting must be run
again, not dead-lettered."""

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.database import is_unreachable


class _ServerError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"server error {sqlstate}")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("sqlstate", "unreachable"),
    [("57P01", True), ("57P02", True), ("57P03", True), ("08006", True), ("23505", False), ("42601", False)],
)
def test_a_server_error_is_judged_by_its_sqlstate_before_the_connection_is_seen_closed(
    sqlstate: str, unreachable: bool
) -> None:
    error = DBAPIError("UPDATE jobs ...", None, _ServerError(sqlstate), connection_invalidated=False)
    assert is_unreachable(error) is unreachable


async def test_a_statement_cut_off_by_the_server_terminating_its_connection_is_unreachable(db: AsyncEngine) -> None:
    with pytest.raises(DBAPIError) as cut:
        async with db.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
    assert is_unreachable(cut.value)


async def test_a_bad_statement_is_not_unreachable(db: AsyncEngine) -> None:
    with pytest.raises(DBAPIError) as bad:
        async with db.connect() as conn:
            await conn.execute(text("SELEC 1"))
    assert not is_unreachable(bad.value)
