"""PostgreSQL through asyncpg: the stores' set-based statements run as one statement text whatever the batch size
(arrays, unnested), sent as driver SQL, so asyncpg prepares each once per connection and SQLAlchemy does no
per-row work; a hot batch is one statement sent with no BEGIN or COMMIT (PostgreSQL runs a statement sent alone
as a transaction of its own). DESIGN.md rule 14's one marked place for such SQL is `app/stores/*/postgres*.py`."""

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.database import UNREACHABLE_STATES
from app.core.messages import dumps

SPARES_KEPT = 4  # about as many as a process's batchers flush at once


def applies(engine: AsyncEngine) -> bool:
    """Whether this engine can take the PostgreSQL stores: PostgreSQL through asyncpg."""
    return engine.dialect.name == "postgresql" and engine.dialect.driver == "asyncpg"


class PgConnections:
    """Connections for one-statement transactions. It keeps up to SPARES_KEPT autocommit connections checked
    out between uses: the pool's checkout and the switch to autocommit cost about as much CPU as the statement
    itself (some 80 of 150 microseconds here). `close` gives them back; then it keeps none."""

    def __init__(self, engine: AsyncEngine, keep: bool = True) -> None:
        self.engine = engine
        self.kept: list[AsyncConnection] = []
        self.keeping = keep

    @asynccontextmanager
    async def autocommit(self) -> AsyncIterator[AsyncConnection]:
        """A connection with no transaction of its own (no BEGIN, no COMMIT: a round trip fewer each), for one
        statement that is a transaction by itself. A kept one when there is one: one the server closed meanwhile
        (a restart) is seen closed and not taken."""
        conn = await self._take()
        done = False
        try:
            yield conn
            done = True
        finally:
            await self._give(conn, done)

    async def _take(self) -> AsyncConnection:
        while self.kept:
            kept = self.kept.pop()
            if _usable(kept):
                return kept
            await _discard(kept)  # not back into the pool: the next checkout would meet it
        conn = await self.engine.connect()
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        return conn

    async def _give(self, conn: AsyncConnection, done: bool) -> None:
        if done and self.keeping and len(self.kept) < SPARES_KEPT and _usable(conn):
            if conn.in_transaction():  # a Core statement's autobegin: nothing to undo in autocommit
                await conn.rollback()
            self.kept.append(conn)
        elif _usable(conn):
            await conn.close()
        else:
            await _discard(conn)

    async def close(self) -> None:
        """Give every kept connection back to the engine's pool; keep none from now on."""
        self.keeping = False
        kept, self.kept = self.kept, []
        for conn in kept:
            await conn.close()


def _usable(conn: AsyncConnection) -> bool:
    sync = conn.sync_connection
    if conn.closed or conn.invalidated or sync is None:
        return False
    driver: Any = sync.connection.driver_connection
    return not driver.is_closed()


async def _discard(conn: AsyncConnection) -> None:
    if not conn.closed and not conn.invalidated:
        await conn.invalidate()
    await conn.close()


async def rows(conn: AsyncConnection, sql: str, params: Sequence[Any]) -> Sequence[Mapping[Any, Any]]:
    """Run one statement; its rows, each a mapping by column name.

    On a connection in autocommit the statement goes straight to asyncpg, past SQLAlchemy's execution machinery:
    half the CPU and half the wall time of `exec_driver_sql` on this machine (about 100 against 200 microseconds
    a statement, the pool checkout included), which a job pays several times over at low load. A driver error is
    raised as SQLAlchemy would raise it (an `IntegrityError`, or a `DBAPIError` with the driver's error as
    `orig`), a lost connection invalidated first, so callers and `is_unreachable` see no difference. Inside a
    transaction the statement goes through SQLAlchemy, which sends the BEGIN it still owes before it; so it does
    when something listens to the engine's statements (an instrumentation, a test counting them)."""
    sync = conn.sync_connection
    if (
        sync is None
        or sync.get_execution_options().get("isolation_level") != "AUTOCOMMIT"
        or sync.dispatch.before_cursor_execute
        or sync.dispatch.after_cursor_execute
    ):
        result = await conn.exec_driver_sql(sql, tuple(params))
        return [row._mapping for row in result] if result.returns_rows else []
    driver: Any = sync.connection.driver_connection
    try:
        found: Sequence[Mapping[Any, Any]] = await driver.fetch(sql, *params)
    except Exception as exc:
        await _raise_as_sqlalchemy(conn, sql, exc, driver.is_closed() or _lost(exc))
        raise
    return found


async def _raise_as_sqlalchemy(conn: AsyncConnection, sql: str, exc: Exception, lost: bool) -> None:
    if lost:
        await conn.invalidate(exc)
    if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
        raise IntegrityError(sql, None, exc) from exc
    if lost or type(exc).__module__.startswith("asyncpg"):
        raise DBAPIError(sql, None, exc, connection_invalidated=lost) from exc


def _lost(exc: BaseException) -> bool:
    """Whether a driver error means the connection is gone (cut, or the server going away)."""
    if isinstance(exc, (OSError, asyncpg.PostgresConnectionError)):
        return True
    state = getattr(exc, "sqlstate", None)
    return isinstance(state, str) and state.startswith(UNREACHABLE_STATES)


def ids_in_order(result: Sequence[Mapping[Any, Any]]) -> list[int]:
    """The serial ids an INSERT ... RETURNING id gave, in the order of the rows inserted (they grow with it)."""
    return sorted(int(row["id"]) for row in result)


def to_json(value: Any) -> str:
    """A value as the JSON text a `::json` array element takes."""
    return dumps(value).decode()


def shifted(sql: str, by: int) -> str:
    """`sql` with each $n placeholder numbered n + by, to follow another statement's parameters."""
    return re.sub(r"\$(\d+)", lambda found: f"${int(found.group(1)) + by}", sql)
