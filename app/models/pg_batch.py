"""PostgreSQL only: the hot path's set-based statements as one statement text whatever the batch size (arrays,
unnested), sent as driver SQL, so asyncpg prepares each once per connection and SQLAlchemy does no per-row
work. A job worker's claim batch and finish batch are each one statement with their audit rows and events
(data-modifying CTEs), sent with no BEGIN or COMMIT: PostgreSQL runs a statement sent alone as a transaction of
its own. This is DESIGN.md rule 14's one marked place for such SQL on the hot path; SQLite and MSSQL take the
portable statements (`app/services/transitions.py`, `app/services/outbox.py`, `app/workers/job_store.py`),
which the tests run too.
"""

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.database import UNREACHABLE_STATES
from app.core.messages import PUBLIC_FIELDS, dumps, loads
from app.models.rows import DeliveryRow, EndpointKeys, delivery_row, endpoint_keys

# Where a statement names its jobs by id, it compares their status as `status || ''`, which no index can serve: so
# the planner reads them by primary key. Without statistics it takes `status = 'pending'` (or 'running') for a
# rare value and reads the status index instead, where every job that has moved on since the last vacuum left a
# dead entry: at 33,000 of them the confirmation's step read 1,127 buffers for 32 jobs, against 102 by primary key,
# and the database's CPU per submit grew with every job ever submitted (tests/test_pg_plans.py).
INSERT_EVENTS = (
    "INSERT INTO job_events (job_id, event, detail, created_at) "
    "SELECT * FROM unnest($1::varchar[], $2::varchar[], $3::json[], $4::timestamptz[])"
)
# Ordered by position, so the serial ids grow in the order of the rows given: sorted, they match them.
INSERT_OUTBOX = (
    "INSERT INTO outbox (exchange, routing_key, body, headers, priority, message_id, job_id, created_at) "
    "SELECT exchange, routing_key, body, headers, priority, message_id, job_id, created_at FROM unnest("
    "$1::varchar[], $2::varchar[], $3::bytea[], $4::json[], $5::int[], $6::varchar[], $7::varchar[], "
    "$8::timestamptz[]) WITH ORDINALITY "
    "AS t(exchange, routing_key, body, headers, priority, message_id, job_id, created_at, n) ORDER BY n "
    "RETURNING id"
)


def applies(conn: AsyncConnection | AsyncEngine) -> bool:
    """Whether this connection (or engine) can take the statements here: PostgreSQL through asyncpg."""
    return conn.dialect.name == "postgresql" and conn.dialect.driver == "asyncpg"


SPARES_KEPT = 4  # about as many as a process's batchers flush at once


@dataclass
class _Spares:
    """Autocommit connections a long-lived process keeps checked out between its batches."""

    kept: list[AsyncConnection] = field(default_factory=list)


_spares: dict[AsyncEngine, _Spares] = {}


def keep_spares(engine: AsyncEngine) -> None:
    """Let `autocommit` keep up to SPARES_KEPT connections of this engine between uses: the pool's checkout and
    the switch to autocommit cost about as much CPU as the statement itself (some 80 of 150 microseconds here).
    Whoever calls this calls `release_spares` before disposing of the engine."""
    if applies(engine):
        _spares.setdefault(engine, _Spares())


async def release_spares(engine: AsyncEngine) -> None:
    """Give every kept connection back to the engine's pool; `autocommit` keeps none from now on."""
    spares = _spares.pop(engine, None)
    for conn in spares.kept if spares else []:
        await conn.close()


def _usable(conn: AsyncConnection) -> bool:
    sync = conn.sync_connection
    if conn.closed or conn.invalidated or sync is None:
        return False
    driver: Any = sync.connection.driver_connection
    return not driver.is_closed()


@asynccontextmanager
async def autocommit(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection with no transaction of its own (no BEGIN, no COMMIT: a round trip fewer each), for one
    statement that is a transaction by itself, as PostgreSQL runs every statement sent alone. A kept one when
    there is one (`keep_spares`): one the server closed meanwhile (a restart) is seen closed and not taken."""
    spares = _spares.get(engine)
    conn: AsyncConnection | None = None
    while spares is not None and spares.kept and conn is None:
        kept = spares.kept.pop()
        if _usable(kept):
            conn = kept
        else:  # not back into the pool: the next checkout would meet it
            await _discard(kept)
    if conn is None:
        conn = await engine.connect()
        await conn.execution_options(isolation_level="AUTOCOMMIT")
    done = False
    try:
        yield conn
        done = True
    finally:
        spares = _spares.get(engine)
        if done and spares is not None and len(spares.kept) < SPARES_KEPT and _usable(conn):
            if conn.in_transaction():  # a Core statement's autobegin: nothing to undo in autocommit
                await conn.rollback()
            spares.kept.append(conn)
        elif _usable(conn):
            await conn.close()
        else:
            await _discard(conn)


async def _discard(conn: AsyncConnection) -> None:
    if not conn.closed and not conn.invalidated:
        await conn.invalidate()
    await conn.close()


def one_transaction(engine: AsyncEngine) -> AbstractAsyncContextManager[AsyncConnection]:
    """A connection for work that is one statement on PostgreSQL (sent alone: `autocommit`) and several
    statements in one transaction elsewhere."""
    return autocommit(engine) if applies(engine) else engine.begin()


async def _rows(conn: AsyncConnection, sql: str, params: Sequence[Any]) -> Sequence[Mapping[Any, Any]]:
    """Run one statement of this module; its rows, each a mapping by column name.

    On a connection in autocommit (`autocommit`) the statement goes straight to asyncpg, past SQLAlchemy's
    execution machinery: half the CPU and half the wall time of `exec_driver_sql` on this machine (about 100
    against 200 microseconds a statement, the pool checkout included), which a job pays several times over at
    low load, one statement per batch of one. A driver error is raised as SQLAlchemy would raise it (an
    `IntegrityError`, or a `DBAPIError` with the driver's error as `orig`), a lost connection invalidated first,
    so callers and `is_unreachable` see no difference. Inside a transaction the statement goes through
    SQLAlchemy, which sends the BEGIN it still owes before it; so it does when something listens to the
    engine's statements (an instrumentation, a test counting them), so that they see every one."""
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
        rows: Sequence[Mapping[Any, Any]] = await driver.fetch(sql, *params)
    except Exception as exc:
        lost = driver.is_closed() or _lost(exc)
        if lost:
            await conn.invalidate(exc)
        if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
            raise IntegrityError(sql, None, exc) from exc
        if lost or type(exc).__module__.startswith("asyncpg"):
            raise DBAPIError(sql, None, exc, connection_invalidated=lost) from exc
        raise
    return rows


def _lost(exc: BaseException) -> bool:
    """Whether a driver error means the connection is gone (cut, or the server going away)."""
    if isinstance(exc, (OSError, asyncpg.PostgresConnectionError)):
        return True
    state = getattr(exc, "sqlstate", None)
    return isinstance(state, str) and state.startswith(UNREACHABLE_STATES)


async def insert_events(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Audit rows (job_id, event, detail, created_at), one statement."""
    await _rows(conn, INSERT_EVENTS, _event_columns(rows))


def _event_columns(rows: Sequence[dict[str, Any]]) -> tuple[list[Any], ...]:
    return (
        [r["job_id"] for r in rows],
        [str(r["event"]) for r in rows],
        [_json(r["detail"]) for r in rows],
        [r["created_at"] for r in rows],
    )


async def insert_outbox(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Outbox rows, one statement; their ids in the order of `rows`."""
    return sorted(int(row["id"]) for row in await _rows(conn, INSERT_OUTBOX, _outbox_columns(rows)))


def _outbox_columns(rows: Sequence[dict[str, Any]]) -> tuple[list[Any], ...]:
    return (
        [r["exchange"] for r in rows],
        [r["routing_key"] for r in rows],
        [r["body"] for r in rows],
        [_json(r["headers"]) for r in rows],
        [r["priority"] for r in rows],
        [r["message_id"] for r in rows],
        [r["job_id"] for r in rows],
        [r["created_at"] for r in rows],
    )


# A batch's audit rows and outbox rows as one statement (a round trip fewer per transaction).
INSERT_EVENTS_AND_OUTBOX = (
    "WITH audit AS (INSERT INTO job_events (job_id, event, detail, created_at) "
    "SELECT * FROM unnest($9::varchar[], $10::varchar[], $11::json[], $12::timestamptz[])) " + INSERT_OUTBOX
)


async def insert_events_and_outbox(
    conn: AsyncConnection, trail: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]
) -> list[int]:
    """`insert_events` and `insert_outbox` in one statement; the outbox ids in the order of `rows`."""
    result = await _rows(conn, INSERT_EVENTS_AND_OUTBOX, (*_outbox_columns(rows), *_event_columns(trail)))
    return sorted(int(row["id"]) for row in result)


def _json(value: Any) -> str:
    return dumps(value).decode()


# Outcomes of many runs as one statement, so one transaction with no BEGIN or COMMIT sent: each row to its own
# status and values behind its seq and fencing token (`runs`), and the audit row and event of each row that
# moved, keyed by (id, runs) so a fenced-out run of the same job writes neither. Returns the moved (id, runs)
# and, for each event staged, its outbox id beside its message id.
FINISH_RECORDED = (
    "WITH v AS (SELECT * FROM unnest($2::varchar[], $3::int[], $4::int[], $5::varchar[], $6::json[], $7::json[], "
    "$8::varchar[], $9::timestamptz[], $10::timestamptz[]) "
    "AS v(id, seq, runs, status, result, error, dead_reason, finished_at, next_attempt_at)), "
    "moved AS (UPDATE jobs SET status = v.status, seq = jobs.seq + 1, updated_at = greatest($1, jobs.updated_at), "
    "lease_until = NULL, "
    "result = v.result, error = v.error, dead_reason = v.dead_reason, finished_at = v.finished_at, "
    "next_attempt_at = v.next_attempt_at FROM v "
    "WHERE jobs.id = v.id AND jobs.seq = v.seq AND jobs.runs = v.runs AND jobs.status || '' = 'running' "
    "RETURNING jobs.id, jobs.runs, jobs.updated_at), "
    "audit AS (INSERT INTO job_events (job_id, event, detail, created_at) "
    "SELECT e.job_id, e.event, e.detail, m.updated_at FROM unnest($2::varchar[], $4::int[], $11::varchar[], "
    "$12::json[]) AS e(job_id, runs, event, detail) JOIN moved AS m ON m.id = e.job_id AND m.runs = e.runs), "
    "staged AS (INSERT INTO outbox (exchange, routing_key, body, headers, priority, message_id, job_id, created_at) "
    "SELECT o.exchange, o.routing_key, o.body, o.headers, o.priority, o.message_id, NULL, $1 "
    "FROM unnest($13::varchar[], $14::varchar[], $15::bytea[], $16::json[], $17::int[], $18::varchar[], "
    "$2::varchar[], $4::int[]) WITH ORDINALITY "
    "AS o(exchange, routing_key, body, headers, priority, message_id, owner, runs, n) "
    "WHERE (o.owner, o.runs) IN (SELECT id, runs FROM moved) ORDER BY o.n RETURNING id, message_id) "
    "SELECT id AS job_id, runs, NULL::varchar AS message_id, NULL::bigint AS outbox_id FROM moved "
    "UNION ALL SELECT NULL, NULL, message_id, id FROM staged"
)


async def finish_recorded(
    conn: AsyncConnection,
    now: datetime,
    rows: Sequence[dict[str, Any]],
    trail: Sequence[dict[str, Any]],
    events: Sequence[dict[str, Any]],
) -> tuple[set[tuple[str, int]], dict[str, int]]:
    """Move running jobs to their outcomes, each row given with every column as it is to be (and the seq and
    `runs` it was claimed with), with its audit row and its event (`trail` and `events` in the order of `rows`,
    all stamped `now`): the (id, runs) that moved, and the outbox id of each staged event by its message id."""
    columns = (
        now,
        [r["id"] for r in rows],
        [r["seq"] for r in rows],
        [r["runs"] for r in rows],
        [r["status"] for r in rows],
        [_json(r["result"]) for r in rows],
        [_json(r["error"]) for r in rows],
        [r["dead_reason"] for r in rows],
        [r["finished_at"] for r in rows],
        [r["next_attempt_at"] for r in rows],
        [str(t["event"]) for t in trail],
        [_json(t["detail"]) for t in trail],
        *_outbox_columns(events)[:6],  # exchange, routing key, body, headers, priority, message id
    )
    moved: set[tuple[str, int]] = set()
    staged: dict[str, int] = {}
    for row in await _rows(conn, FINISH_RECORDED, columns):
        if row["job_id"] is not None:
            moved.add((row["job_id"], row["runs"]))
        else:
            staged[row["message_id"]] = int(row["outbox_id"])
    return moved, staged


JSON_COLUMNS = ("payload", "result", "error")


JOB_COLUMNS = (
    ("id", "varchar"),
    ("client_id", "varchar"),
    ("job_type", "varchar"),
    ("status", "varchar"),
    ("priority", "int"),
    ("max_retries", "int"),
    ("timeout_seconds", "float8"),
    ("attempts", "int"),
    ("runs", "int"),
    ("seq", "int"),
    ("payload", "json"),
    ("sealed", "text"),
    ("result", "json"),
    ("error", "json"),
    ("dead_reason", "varchar"),
    ("idempotency_key", "varchar"),
    ("request_hash", "varchar"),
    ("callback_url", "varchar"),
    ("request_id", "varchar"),
    ("lease_until", "timestamptz"),
    ("next_attempt_at", "timestamptz"),
    ("created_at", "timestamptz"),
    ("updated_at", "timestamptz"),
    ("started_at", "timestamptz"),
    ("finished_at", "timestamptz"),
    ("run_at", "timestamptz"),
)
INSERT_JOBS = (
    f"INSERT INTO jobs ({', '.join(name for name, _ in JOB_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(JOB_COLUMNS, start=1))
    + ")"
)


def _job_columns(rows: Sequence[Any]) -> tuple[list[Any], ...]:
    return tuple(
        [_json(r[name]) for r in rows] if kind == "json" else [r[name] for r in rows] for name, kind in JOB_COLUMNS
    )


def _shifted(sql: str, by: int) -> str:
    """`sql` with each $n placeholder numbered n + by, to follow another statement's parameters."""
    return re.sub(r"\$(\d+)", lambda found: f"${int(found.group(1)) + by}", sql)


# New jobs with their audit rows and their outbox rows as one statement (a transaction by itself when sent alone).
SAVE_JOBS = "WITH new_jobs AS (" + _shifted(INSERT_JOBS, 12) + "), " + INSERT_EVENTS_AND_OUTBOX.removeprefix("WITH ")


async def save_jobs(
    conn: AsyncConnection, jobs: Sequence[Any], trail: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]
) -> list[int]:
    """New jobs (every column given), their audit rows and their outbox rows in one statement; the outbox ids in
    the order of `rows`."""
    columns = (*_outbox_columns(rows), *_event_columns(trail), *_job_columns(jobs))
    return sorted(int(row["id"]) for row in await _rows(conn, SAVE_JOBS, columns))


CLAIM_DELIVERIES = (
    "UPDATE deliveries SET lease_until = $2, updated_at = $3 "
    "WHERE id = ANY($1::varchar[]) AND status = 'pending' AND (lease_until IS NULL OR lease_until < $3) "
    "AND (next_attempt_at IS NULL OR next_attempt_at <= $3) RETURNING *"
)


def _record_deliveries(claimed_at: int) -> str:
    """Each delivery to the state its attempt leads to, behind its fencing check; `$claimed_at` holds each row's
    `updated_at` as its claim left it. A row changed since (an operator's redelivery while the attempt was in
    flight) keeps the operator's status, next attempt and budget, unless the attempt succeeded: the attempt is
    still counted and logged."""
    kept = "d.updated_at = v.claimed_at"
    return (
        f"UPDATE deliveries AS d SET status = CASE WHEN {kept} OR v.status = 'succeeded' THEN v.status "
        "ELSE d.status END, attempt_count = d.attempt_count + 1, "
        f"budget_used = CASE WHEN {kept} THEN d.budget_used + 1 ELSE d.budget_used END, "
        f"next_attempt_at = CASE WHEN {kept} OR v.status = 'succeeded' THEN v.next_at ELSE d.next_attempt_at END, "
        "lease_until = NULL, updated_at = $5 "
        f"FROM unnest($1::varchar[], $2::int[], $3::varchar[], $4::timestamptz[], ${claimed_at}::timestamptz[]) "
        "AS v(id, claimed, status, next_at, claimed_at) "
        "WHERE d.id = v.id AND d.attempt_count = v.claimed RETURNING d.id"
    )


RECORD_DELIVERIES = _record_deliveries(claimed_at=6)
INSERT_ATTEMPTS = (
    "INSERT INTO delivery_attempts "
    "(delivery_id, attempt, status_code, duration_ms, error, response_body, created_at, next_attempt_at) "
    "SELECT * FROM unnest($1::varchar[], $2::int[], $3::int[], $4::float8[], $5::varchar[], $6::text[], "
    "$7::timestamptz[], $8::timestamptz[])"
)
DELIVERY_COLUMNS = (
    "id varchar, event_id varchar, target varchar, endpoint_id varchar, client_id varchar, job_id varchar, "
    "event_type varchar, url varchar, body bytea, request_id varchar, status varchar, attempt_count int, "
    "budget_used int, next_attempt_at timestamptz, lease_until timestamptz, created_at timestamptz, "
    "updated_at timestamptz"
)
_DELIVERY_NAMES = [part.split()[0] for part in DELIVERY_COLUMNS.split(", ")]
INSERT_DELIVERIES = (
    f"INSERT INTO deliveries ({', '.join(_DELIVERY_NAMES)}) SELECT * FROM unnest("
    + ", ".join(f"${i}::{part.split()[1]}[]" for i, part in enumerate(DELIVERY_COLUMNS.split(", "), start=1))
    + ")"
)


# The active endpoints of some clients, in the order they were registered (as `deliveries.targets_for` reads them
# elsewhere), for a fan-out batch to match its events against.
SUBSCRIBED_ENDPOINTS = (
    "SELECT id, client_id, url, events, job_type, job_id FROM webhook_endpoints "
    "WHERE client_id = ANY($1::varchar[]) AND active AND deleted_at IS NULL ORDER BY created_at, id"
)


async def subscribed_endpoints(conn: AsyncConnection, client_ids: list[str]) -> list[dict[str, Any]]:
    """The active endpoints of `client_ids`, each with its `events` as a list."""
    rows = [dict(row) for row in await _rows(conn, SUBSCRIBED_ENDPOINTS, (client_ids,))]
    for row in rows:
        if isinstance(row["events"], str):
            row["events"] = loads(row["events"])
    return rows


# The claim with what signing needs, in one statement: each delivery taken, beside its endpoint's row (the
# endpoint's columns prefixed "ep_"; none for a callback delivery or an endpoint since deleted).
ENDPOINT_COLUMNS = ("id", "secret", "previous_secret", "previous_expires_at", "active", "deleted_at", "failing_since")
CLAIM_DELIVERIES_WITH_ENDPOINTS = (
    "WITH taken AS ("
    + CLAIM_DELIVERIES
    + ") SELECT taken.*, "
    + ", ".join(f"e.{name} AS ep_{name}" for name in ENDPOINT_COLUMNS)
    + " FROM taken LEFT JOIN webhook_endpoints AS e ON e.id = taken.endpoint_id"
)


async def claim_deliveries(
    conn: AsyncConnection, ids: list[str], now: datetime, lease: datetime
) -> tuple[list[DeliveryRow], dict[str, EndpointKeys]]:
    """The deliveries among `ids` that are pending, due and not leased, now leased: their rows after it, and
    their endpoints' rows by id."""
    taken: list[DeliveryRow] = []
    endpoints: dict[str, EndpointKeys] = {}
    for record in await _rows(conn, CLAIM_DELIVERIES_WITH_ENDPOINTS, (ids, lease, now)):
        row = dict(record)
        endpoint = {name: row.pop(f"ep_{name}") for name in ENDPOINT_COLUMNS}
        if endpoint["id"] is not None:
            endpoints[endpoint["id"]] = endpoint_keys(endpoint)
        taken.append(delivery_row(row))
    return taken, endpoints


async def record_deliveries(conn: AsyncConnection, rows: Sequence[dict[str, Any]], now: datetime) -> set[str]:
    """Each delivery's new status and next attempt, fenced by the attempt count it was claimed with (id,
    claimed, status, next_at, claimed_at: its `updated_at` as claimed); the ids that were still ours."""
    columns = tuple([r[name] for r in rows] for name in ("id", "claimed", "status", "next_at"))
    claimed_at = [r["claimed_at"] for r in rows]
    return {row["id"] for row in await _rows(conn, RECORD_DELIVERIES, (*columns, now, claimed_at))}


# A batch of attempts whose endpoints need no judging as one statement: each delivery to its new state behind
# its fencing check, and the attempt row and audit row of each delivery that was still ours.
RECORD_DELIVERIES_LOGGED = (
    "WITH recorded AS (" + _record_deliveries(claimed_at=17) + "), "
    "attempts AS (INSERT INTO delivery_attempts "
    "(delivery_id, attempt, status_code, duration_ms, error, response_body, created_at, next_attempt_at) "
    "SELECT a.delivery_id, a.attempt, a.status_code, a.duration_ms, a.error, a.response_body, $5, a.next_at "
    "FROM unnest($6::varchar[], $7::int[], $8::int[], $9::float8[], $10::varchar[], $11::text[], "
    "$12::timestamptz[]) AS a(delivery_id, attempt, status_code, duration_ms, error, response_body, next_at) "
    "WHERE a.delivery_id IN (SELECT id FROM recorded)), "
    "trail AS (INSERT INTO job_events (job_id, event, detail, created_at) "
    "SELECT t.job_id, t.event, t.detail, $5 FROM unnest($13::varchar[], $14::varchar[], $15::varchar[], "
    "$16::json[]) AS t(delivery_id, job_id, event, detail) WHERE t.delivery_id IN (SELECT id FROM recorded)) "
    "SELECT id FROM recorded"
)


async def record_deliveries_logged(
    conn: AsyncConnection,
    changes: Sequence[dict[str, Any]],
    attempts: Sequence[dict[str, Any]],
    trail: Sequence[dict[str, Any]],
    now: datetime,
) -> set[str]:
    """`record_deliveries`, `insert_attempts` and the audit rows (each with the `delivery_id` it belongs to) in
    one statement, every row stamped `now`; the ids that were still ours."""
    names = ("delivery_id", "attempt", "status_code", "duration_ms", "error", "response_body", "next_attempt_at")
    columns = (
        *([r[name] for r in changes] for name in ("id", "claimed", "status", "next_at")),
        now,
        *([r[name] for r in attempts] for name in names),
        [t["delivery_id"] for t in trail],
        *_event_columns(trail)[:3],  # job_id, event, detail
        [r["claimed_at"] for r in changes],
    )
    return {row["id"] for row in await _rows(conn, RECORD_DELIVERIES_LOGGED, columns)}


DROP_OUTBOX = "DELETE FROM outbox WHERE id = ANY($1::bigint[])"


async def drop_outbox(conn: AsyncConnection, ids: list[int]) -> None:
    """Delete outbox rows by id: one array parameter, where an IN list is compiled anew for each length."""
    await _rows(conn, DROP_OUTBOX, (ids,))


async def insert_attempts(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Attempt log rows, one statement."""
    names = ("delivery_id", "attempt", "status_code", "duration_ms", "error", "response_body", "created_at")
    columns = tuple([r[name] for r in rows] for name in (*names, "next_attempt_at"))
    await _rows(conn, INSERT_ATTEMPTS, columns)


# A fan-out batch's new deliveries and their messages as one statement: a delivery already there (the same event
# fanned out before, or by another worker at the same moment) is skipped by the unique index (rule 10), and only
# the deliveries inserted here get an outbox row.
STAGE_DELIVERIES = (
    "WITH inserted AS (" + INSERT_DELIVERIES + " ON CONFLICT DO NOTHING RETURNING id) "
    "INSERT INTO outbox (exchange, routing_key, body, headers, priority, message_id, job_id, created_at) "
    "SELECT o.exchange, o.routing_key, o.body, o.headers, o.priority, o.message_id, NULL, o.created_at FROM unnest("
    + ", ".join(
        f"${i}::{kind}[]"
        for i, kind in enumerate(
            ("varchar", "varchar", "bytea", "json", "int", "varchar", "timestamptz", "varchar"),
            start=len(_DELIVERY_NAMES) + 1,
        )
    )
    + ") WITH ORDINALITY AS o(exchange, routing_key, body, headers, priority, message_id, created_at, owner, n) "
    "WHERE o.owner IN (SELECT id FROM inserted) ORDER BY o.n RETURNING id, message_id"
)


async def stage_deliveries(
    conn: AsyncConnection, rows: Sequence[Mapping[str, Any]], messages: Sequence[dict[str, Any]]
) -> dict[str, int]:
    """Insert the deliveries that are not there yet, each with its message (`messages[i]` the outbox row of
    `rows[i]`): the outbox id of each message staged, by message id."""
    outbox = _outbox_columns(messages)
    columns = (
        *([r[name] for r in rows] for name in _DELIVERY_NAMES),
        *outbox[:6],  # exchange, routing key, body, headers, priority, message id
        outbox[7],  # created_at
        [r["id"] for r in rows],
    )
    return {row["message_id"]: int(row["id"]) for row in await _rows(conn, STAGE_DELIVERIES, columns)}


# -- a claim batch as one statement -------------------------------------------------------------------------
# The audit rows and events of the jobs a claim moves are built here, in SQL, from the rows as moved, so the
# whole batch is one statement (a transaction by itself: no BEGIN, no COMMIT, no second statement for the rows
# that follow from the first). The event body is the same bytes as `messages.job_event` builds in Python
# (compact JSON, its keys in its order, datetimes as ISO 8601 in UTC); tests/test_pg_claim.py holds the two
# side by side.
def _json_text(column: str, kind: str) -> str:
    """SQL for the compact JSON text of one column of `moved`, as orjson writes its Python value."""
    if kind == "timestamptz":
        return _timestamp_text(column)
    if kind in ("json", "int", "float8"):  # their text is already their JSON
        return f"coalesce({column}::text, 'null')"
    return f"coalesce(to_json({column})::text, 'null')"


def _timestamp_text(value: str) -> str:
    """SQL for a timestamptz as orjson writes a UTC datetime: microseconds only when there are some."""
    return (
        f"CASE WHEN {value} IS NULL THEN 'null' ELSE '\"' || to_char({value} AT TIME ZONE 'UTC', "
        f"'YYYY-MM-DD\"T\"HH24:MI:SS') || CASE WHEN to_char({value}, 'US') = '000000' THEN '' "
        f"ELSE '.' || to_char({value}, 'US') END || '+00:00\"' END"
    )


_KINDS = dict(JOB_COLUMNS)
_EVENT_ID = "'evt_' || replace(m.id, '-', '') || '_' || m.seq"
_EVENT_BODY = (
    "'{\"id\":' || to_json(" + _EVENT_ID + ")::text || ',\"type\":' || to_json('job.' || m.status)::text"
    " || ',\"created_at\":' || " + _timestamp_text("m.updated_at") + " || ',\"seq\":' || m.seq"
    ' || \',"data":{"job":{\' || '
    + " || ',' || ".join(f"'\"{name}\":' || {_json_text('m.' + name, _KINDS[name])}" for name in PUBLIC_FIELDS)
    + " || '}}}'"
)
# A pending job (its message beat the record of its own publish) is queued and claimed by the same UPDATE: its
# row goes from pending to running with two seq steps, and the queued step between them, as the row was after it
# (a pending job has never run: no lease, no start), gets its audit row and event too, before the running one.
_QUEUED_STEP = {
    "status": "'queued'",
    "attempts": "c.attempts - 1",
    "runs": "c.runs - 1",
    "seq": "c.seq - 1",
    "lease_until": "NULL",
    "started_at": "NULL",
}
_JOB_NAMES = [name for name, _ in JOB_COLUMNS]


def _recorded(now: str, exchange: str) -> str:
    """What follows a CTE `moved` (the moved rows, each with its `source` status): the audit row and the staged
    event of each, and the rows with their events, in the order of the steps; `now` and `exchange` are the
    statement's placeholders for those values. An audit row takes its row's `updated_at`: the move's stamp,
    which is `now` unless the job's last change is later (transitions.stamped)."""
    return (
        "audit AS (INSERT INTO job_events (job_id, event, detail, created_at) "
        "SELECT m.id, m.status, ('{\"from\":' || to_json(m.source)::text || ',\"to\":' || to_json(m.status)::text "
        "|| ',\"attempt\":' || m.attempts || '}')::json, m.updated_at FROM moved AS m ORDER BY m.id, m.seq), "
        "staged AS (INSERT INTO outbox "
        "(exchange, routing_key, body, headers, priority, message_id, job_id, created_at) "
        f"SELECT {exchange}, 'job.' || m.job_type || '.' || m.status, convert_to(" + _EVENT_BODY + ", 'UTF8'), "
        "CASE WHEN coalesce(m.request_id, '') = '' THEN '{}'::json "
        "ELSE json_build_object('x-request-id', m.request_id) END, NULL, "
        + _EVENT_ID
        + f", NULL, {now} FROM moved AS m ORDER BY m.id, m.seq "
        "RETURNING id, routing_key, body, headers, message_id) "
        "SELECT m.*, s.id AS outbox_id, s.routing_key AS event_key, s.body AS event_body, s.headers AS event_headers, "
        "s.message_id AS event_id FROM moved AS m JOIN staged AS s ON s.message_id = " + _EVENT_ID + " "
        "ORDER BY m.id, m.seq"
    )


# The claim and the confirmation lock their rows first, in id order (`ORDER BY id FOR UPDATE`): a statement
# that waited for the other's lock reads the row as that one left it (a claim waiting on the job's pending ->
# queued step claims it from queued, where a plain UPDATE would compare with the status it read before waiting,
# lose, and leave the job to a claim of its own in another transaction), and two batches holding the same jobs
# lock them in the same order, so they cannot deadlock.
CLAIM_RECORDED = (
    "WITH claimed AS (UPDATE jobs SET status = 'running', attempts = jobs.attempts + 1, runs = jobs.runs + 1, "
    "seq = jobs.seq + CASE WHEN was.status = 'pending' THEN 2 ELSE 1 END, lease_until = $2, "
    "next_attempt_at = NULL, started_at = coalesce(jobs.started_at, $3), updated_at = greatest($3, jobs.updated_at) "
    "FROM (SELECT id, status FROM jobs WHERE id = ANY($1::varchar[]) AND status || '' IN ('pending', 'queued') "
    "ORDER BY id FOR UPDATE) AS was "
    "WHERE jobs.id = was.id AND jobs.attempts < jobs.max_retries + 1 "
    "RETURNING jobs.*, was.status AS was), "
    "moved AS (SELECT " + ", ".join(f"c.{name}" for name in _JOB_NAMES) + ", 'queued'::varchar AS source "
    "FROM claimed AS c UNION ALL SELECT "
    + ", ".join(f"{_QUEUED_STEP.get(name, 'c.' + name)} AS {name}" for name in _JOB_NAMES)
    + ", 'pending'::varchar FROM claimed AS c WHERE c.was = 'pending'), "
    + _recorded("$3", "$4")
)
# pending -> queued for the jobs whose messages the broker confirmed, with their audit rows and events, and the
# confirmed outbox rows deleted, as one statement (the API's and the relay's confirmations). It is the move of
# transitions.cas_pending with what records it; CLAIM_RECORDED makes the same move, recorded the same way, for a
# job whose message reached a worker before its confirmation: those are the two places it is written here.
QUEUE_RECORDED = (
    "WITH moved AS (UPDATE jobs SET status = 'queued', seq = jobs.seq + 1, updated_at = greatest($2, jobs.updated_at) "
    "FROM (SELECT id FROM jobs WHERE id = ANY($1::varchar[]) AND status || '' = 'pending' ORDER BY id FOR UPDATE) AS p "
    "WHERE jobs.id = p.id AND jobs.status || '' = 'pending' RETURNING "
    + ", ".join(f"jobs.{name}" for name in _JOB_NAMES)
    + ", 'pending'::varchar AS source), "
    "gone AS (DELETE FROM outbox WHERE id = ANY($4::bigint[])), " + _recorded("$2", "$3")
)


@dataclass(frozen=True)
class Recorded:
    """A row moved by `claim_recorded`, from where, and the event staged for it: (outbox id, routing key, body,
    headers, message id)."""

    row: dict[str, Any]
    source: str
    event: tuple[int, str, bytes, dict[str, Any], str]


async def claim_recorded(
    conn: AsyncConnection, job_ids: list[str], now: datetime, lease: datetime, events_exchange: str
) -> list[Recorded]:
    """Rule 3's claim for a batch as one statement: the pending or queued among `job_ids` within their budget
    running, each step (pending -> queued, queued -> running) with its audit row and its event staged in the
    outbox, in the order of the steps."""
    return _moved(await _rows(conn, CLAIM_RECORDED, (job_ids, lease, now, events_exchange)))


async def queue_recorded(
    conn: AsyncConnection, job_ids: list[str], now: datetime, events_exchange: str, confirmed: list[int]
) -> list[Recorded]:
    """pending -> queued for the pending among `job_ids`, each with its audit row and its event staged, and the
    outbox rows `confirmed` deleted, as one statement."""
    return _moved(await _rows(conn, QUEUE_RECORDED, (job_ids, now, events_exchange, confirmed)))


def _moved(result: Sequence[Mapping[Any, Any]]) -> list[Recorded]:
    moved: list[Recorded] = []
    for record in result:
        row = dict(record)
        event = (
            int(row.pop("outbox_id")),
            row.pop("event_key"),
            bytes(row.pop("event_body")),
            _parsed(row.pop("event_headers")),
            row.pop("event_id"),
        )
        source = row.pop("source")
        moved.append(Recorded(_loaded(row), source, event))
    return moved


def _parsed(value: Any) -> dict[str, Any]:
    return loads(value) if isinstance(value, str) else dict(value or {})


def _loaded(row: dict[str, Any]) -> dict[str, Any]:
    for name in JSON_COLUMNS:
        if isinstance(row[name], str):
            row[name] = loads(row[name])
    return row
