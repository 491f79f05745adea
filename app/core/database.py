"""The async engine: one per process, created at start-up and passed in."""

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.core.messages import dumps, loads

# Errors that mean "the database is not reachable", as opposed to a bug in a statement.
UNREACHABLE = (OperationalError, InterfaceError, OSError, ConnectionError)


# SQLSTATEs that say the same from the server: a connection exception (class 08), or the server shutting down,
# crashing or starting up (57P01-57P03). A statement cut off by a restart can raise one before the driver has
# seen its connection close, so the error is not yet marked as a disconnect.
UNREACHABLE_STATES = ("08", "57P01", "57P02", "57P03")


def sqlstate(exc: BaseException) -> str | None:
    """The server's SQLSTATE of a database error (the driver's error SQLAlchemy wraps as `orig`), or None."""
    state = getattr(getattr(exc, "orig", None), "sqlstate", None)
    return state if isinstance(state, str) else None


def is_unreachable(exc: BaseException) -> bool:
    """Whether an exception means the database could not be reached."""
    if isinstance(exc, UNREACHABLE):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    state = sqlstate(exc)
    return exc.connection_invalidated or (state is not None and state.startswith(UNREACHABLE_STATES))


NO_AUTOVACUUM = (
    "PostgreSQL runs without autovacuum (autovacuum = off): no table is analysed and no dead row is cleared, so "
    "the tables and their indexes only grow, and the planner guesses their sizes. Turn autovacuum on, as "
    "PostgreSQL ships, or run VACUUM ANALYZE on jobs, job_events, deliveries and outbox regularly."
)
# How long a connection keeps a prepared statement (asyncpg's cache) before it prepares it again, in seconds.
# PostgreSQL gives a statement run often a generic plan, made for the tables as they are then, and keeps it until
# the table is analysed. A process that starts on small tables would keep plans that read the whole table by the
# time it holds tens of thousands of jobs, wherever nothing analyses it (autovacuum off, or not yet): in the soak,
# the finish's plan read 37,188 rows to find 32, and PostgreSQL spent about 3 ms per job, against 0.13 ms in the
# drain. Made afresh every 30 s, the plans follow the tables: the soak ran 710 against 359 jobs/s, PostgreSQL at
# 0.53 instead of 1.04 cores past the 10,000th job. Preparing a statement again costs one round trip.
STATEMENT_LIFETIME = 30


async def server_warning(engine: AsyncEngine) -> str | None:
    """What the log should say about the database server's configuration, or None: on PostgreSQL, that it runs
    without autovacuum. A server that cannot be asked is reported elsewhere."""
    if engine.dialect.name != "postgresql":
        return None
    try:
        async with engine.connect() as conn:
            query = "SELECT setting FROM pg_settings WHERE name = 'autovacuum'"
            setting = (await conn.exec_driver_sql(query)).scalar()
    except (DBAPIError, OSError):
        return None
    return NO_AUTOVACUUM if setting == "off" else None


def make_engine(url: str, pool_size: int = 10) -> AsyncEngine:
    """An engine for PostgreSQL, MSSQL or SQLite, with SQLite made safe for one process."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    # No pre-ping: it costs a round trip on every checkout. A connection the server dropped fails once,
    # SQLAlchemy invalidates the pool on that disconnect, and the caller answers 503 / retries the message.
    kwargs: dict[str, Any] = {"pool_size": pool_size, "max_overflow": pool_size, "pool_recycle": 1800}
    if parsed.get_backend_name() == "postgresql":
        kwargs["connect_args"] = {"timeout": 5, "max_cached_statement_lifetime": STATEMENT_LIFETIME}
    return create_async_engine(url, json_serializer=_json_text, json_deserializer=loads, **kwargs)


def _json_text(value: Any) -> str:
    return dumps(value).decode()


def _sqlite_engine(url: str) -> AsyncEngine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url, connect_args={"timeout": 30}, json_serializer=_json_text, json_deserializer=loads)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the driver, decide when transactions begin; then begin them IMMEDIATE.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine
