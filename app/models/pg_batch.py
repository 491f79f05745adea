"""PostgreSQL only: the hot path's multi-row INSERTs as one statement text whatever the batch size (arrays,
unnested), sent as driver SQL, so asyncpg prepares each once per connection and SQLAlchemy does no per-row
work. This is DESIGN.md rule 14's one marked place for such SQL on the hot path; SQLite and MSSQL take the
portable statements (`app/services/transitions.py`, `app/services/outbox.py`), which the tests run too.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import dumps, loads

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


def applies(conn: AsyncConnection) -> bool:
    """Whether this connection can take the statements here: PostgreSQL through asyncpg."""
    return conn.dialect.name == "postgresql" and conn.dialect.driver == "asyncpg"


async def insert_events(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Audit rows (job_id, event, detail, created_at), one statement."""
    columns = (
        [r["job_id"] for r in rows],
        [str(r["event"]) for r in rows],
        [_json(r["detail"]) for r in rows],
        [r["created_at"] for r in rows],
    )
    await conn.exec_driver_sql(INSERT_EVENTS, columns)


async def insert_outbox(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Outbox rows, one statement; their ids in the order of `rows`."""
    columns = (
        [r["exchange"] for r in rows],
        [r["routing_key"] for r in rows],
        [r["body"] for r in rows],
        [_json(r["headers"]) for r in rows],
        [r["priority"] for r in rows],
        [r["message_id"] for r in rows],
        [r["job_id"] for r in rows],
        [r["created_at"] for r in rows],
    )
    result = await conn.exec_driver_sql(INSERT_OUTBOX, columns)
    return sorted(int(row[0]) for row in result)


def _json(value: Any) -> str:
    return dumps(value).decode()


# A run's outcome for many jobs: each row to its own values, behind its own seq and fencing token.
FINISH = (
    "UPDATE jobs SET status = $1, seq = jobs.seq + 1, updated_at = $2, lease_until = NULL, result = v.result, "
    "error = v.error, dead_reason = v.dead_reason, finished_at = v.finished_at, next_attempt_at = v.next_attempt_at "
    "FROM unnest($3::varchar[], $4::int[], $5::int[], $6::json[], $7::json[], $8::varchar[], $9::timestamptz[], "
    "$10::timestamptz[]) AS v(id, seq, runs, result, error, dead_reason, finished_at, next_attempt_at) "
    "WHERE jobs.id = v.id AND jobs.seq = v.seq AND jobs.runs = v.runs AND jobs.status = 'running' "
    "RETURNING jobs.id"
)


async def finish(conn: AsyncConnection, to: str, now: datetime, rows: Sequence[dict[str, Any]]) -> set[str]:
    """Move running jobs to `to` (succeeded, retrying or dead_lettered), each row given with every column as it
    is to be; the ids of those whose seq and `runs` still held."""
    columns = (
        to,
        now,
        [r["id"] for r in rows],
        [r["seq"] for r in rows],
        [r["runs"] for r in rows],
        [_json(r["result"]) for r in rows],
        [_json(r["error"]) for r in rows],
        [r["dead_reason"] for r in rows],
        [r["finished_at"] for r in rows],
        [r["next_attempt_at"] for r in rows],
    )
    result = await conn.exec_driver_sql(FINISH, columns)
    return {row[0] for row in result}


# Rule 3's compare-and-set for the common claim and pending -> queued (as in job_store and transitions).
CLAIM_QUEUED = (
    "UPDATE jobs SET status = 'running', attempts = attempts + 1, runs = runs + 1, seq = seq + 1, "
    "lease_until = $2, next_attempt_at = NULL, started_at = coalesce(started_at, $3), updated_at = $3 "
    "WHERE id = ANY($1::varchar[]) AND status = 'queued' AND attempts < max_retries + 1 RETURNING *"
)
QUEUE_PENDING = (
    "UPDATE jobs SET status = 'queued', seq = seq + 1, updated_at = $2 "
    "WHERE id = ANY($1::varchar[]) AND status = 'pending' RETURNING *"
)
JSON_COLUMNS = ("payload", "result", "error")


async def claim_queued(conn: AsyncConnection, job_ids: list[str], now: datetime, lease: datetime) -> list[Any]:
    """The queued jobs among `job_ids` within their budget, now running: their rows after the claim."""
    return _jobs(await conn.exec_driver_sql(CLAIM_QUEUED, (job_ids, lease, now)))


async def queue_pending(conn: AsyncConnection, job_ids: list[str], now: datetime) -> list[Any]:
    """The pending jobs among `job_ids`, now queued: their rows after the move."""
    return _jobs(await conn.exec_driver_sql(QUEUE_PENDING, (job_ids, now)))


def _jobs(result: Any) -> list[dict[str, Any]]:
    rows = [dict(row._mapping) for row in result]
    for row in rows:
        for name in JSON_COLUMNS:
            if isinstance(row[name], str):
                row[name] = loads(row[name])
    return rows


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


async def insert_jobs(conn: AsyncConnection, rows: Sequence[Any]) -> None:
    """New jobs, every column given, one statement."""
    columns = tuple(
        [_json(r[name]) for r in rows] if kind == "json" else [r[name] for r in rows] for name, kind in JOB_COLUMNS
    )
    await conn.exec_driver_sql(INSERT_JOBS, columns)


CLAIM_DELIVERIES = (
    "UPDATE deliveries SET lease_until = $2, updated_at = $3 "
    "WHERE id = ANY($1::varchar[]) AND status = 'pending' AND (lease_until IS NULL OR lease_until < $3) "
    "AND (next_attempt_at IS NULL OR next_attempt_at <= $3) RETURNING *"
)
RECORD_DELIVERIES = (
    "UPDATE deliveries AS d SET status = v.status, attempt_count = d.attempt_count + 1, "
    "budget_used = d.budget_used + 1, next_attempt_at = v.next_at, lease_until = NULL, updated_at = $5 "
    "FROM unnest($1::varchar[], $2::int[], $3::varchar[], $4::timestamptz[]) AS v(id, claimed, status, next_at) "
    "WHERE d.id = v.id AND d.attempt_count = v.claimed RETURNING d.id"
)
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


async def claim_deliveries(conn: AsyncConnection, ids: list[str], now: datetime, lease: datetime) -> list[Any]:
    """The deliveries among `ids` that are pending, due and not leased, now leased: their rows after it."""
    return [dict(row._mapping) for row in await conn.exec_driver_sql(CLAIM_DELIVERIES, (ids, lease, now))]


async def record_deliveries(conn: AsyncConnection, rows: Sequence[dict[str, Any]], now: datetime) -> set[str]:
    """Each delivery's new status and next attempt, fenced by the attempt count it was claimed with (id,
    claimed, status, next_at); the ids that were still ours."""
    columns = tuple([r[name] for r in rows] for name in ("id", "claimed", "status", "next_at"))
    result = await conn.exec_driver_sql(RECORD_DELIVERIES, (*columns, now))
    return {row[0] for row in result}


async def insert_attempts(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """Attempt log rows, one statement."""
    names = ("delivery_id", "attempt", "status_code", "duration_ms", "error", "response_body", "created_at")
    columns = tuple([r[name] for r in rows] for name in (*names, "next_attempt_at"))
    await conn.exec_driver_sql(INSERT_ATTEMPTS, columns)


async def insert_deliveries(conn: AsyncConnection, rows: Sequence[dict[str, Any]]) -> None:
    """New deliveries, one statement."""
    await conn.exec_driver_sql(INSERT_DELIVERIES, tuple([r[name] for r in rows] for name in _DELIVERY_NAMES))
