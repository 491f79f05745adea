"""The jobs store's PostgreSQL statements: a batch of any size as one statement text (arrays, unnested); a
claim batch, a finish batch and a confirmation batch each one statement with their audit rows and events
(data-modifying CTEs). Each status change's guard is its step's (`app/stores/steps.py`)."""

from typing import Any

from app.core.event_bodies import JOB_FIELDS
from app.core.messages import loads
from app.stores import steps
from app.stores.outbox.postgres import INSERT_OUTBOX
from app.stores.postgres import shifted

# Where a statement names its jobs by id, it compares their status as `status || ''`, which no index can serve: so
# the planner reads them by primary key. Without statistics it takes `status = 'pending'` (or 'running') for a
# rare value and reads the status index instead, where every job that has moved on since the last vacuum left a
# dead entry: at 33,000 of them the confirmation's step read 1,127 buffers for 32 jobs, against 102 by primary key,
# and the database's CPU per submit grew with every job ever submitted (tests/stores/test_pg_plans.py).
INSERT_EVENTS = (
    "INSERT INTO job_events (job_id, event, detail, created_at) "
    "SELECT * FROM unnest($1::varchar[], $2::varchar[], $3::json[], $4::timestamptz[])"
)

# A batch's audit rows and outbox rows as one statement (a round trip fewer per transaction).
INSERT_EVENTS_AND_OUTBOX = (
    "WITH audit AS (INSERT INTO job_events (job_id, event, detail, created_at) "
    "SELECT * FROM unnest($9::varchar[], $10::varchar[], $11::json[], $12::timestamptz[])) " + INSERT_OUTBOX
)


# Outcomes of many runs as one statement, so one transaction with no BEGIN or COMMIT sent: each row to its own
# status and values behind its seq and fencing token (`runs`), and the audit row and event of each row that
# moved, keyed by (id, runs) so a fenced-out run of the same job writes neither. Returns the moved (id, runs)
# and, for each event staged, its outbox id beside its message id. The three finishing steps move a job from the
# same statuses (running): one guard for the batch. A retry of a job whose cancel was asked for is refused (as in
# the portable store's FINISH_WHERE): its worker records it cancelled instead.
assert len({step.sources for step in steps.FINISHES.values()}) == 1
FINISH_GUARD = (
    steps.SUCCEED.sql_guard() + f" AND (v.status <> '{steps.RETRY.target}' OR jobs.cancel_requested_at IS NULL)"
)
FINISH_CTES = (
    "WITH v AS (SELECT * FROM unnest($2::varchar[], $3::int[], $4::int[], $5::varchar[], $6::json[], $7::json[], "
    "$8::varchar[], $9::timestamptz[], $10::timestamptz[], $19::json[], $20::varchar[]) "
    "AS v(id, seq, runs, status, result, error, dead_reason, finished_at, next_attempt_at, progress, failure_group)), "
    "moved AS (UPDATE jobs SET status = v.status, seq = jobs.seq + 1, updated_at = greatest($1, jobs.updated_at), "
    "lease_until = NULL, "
    "result = v.result, error = v.error, dead_reason = v.dead_reason, finished_at = v.finished_at, "
    "next_attempt_at = v.next_attempt_at, progress = coalesce(v.progress, jobs.progress), "
    "failure_group = v.failure_group FROM v "
    "WHERE jobs.id = v.id AND jobs.seq = v.seq AND jobs.runs = v.runs AND " + FINISH_GUARD + " "
    "RETURNING jobs.id, jobs.runs, jobs.updated_at, jobs.status, jobs.workflow_id), "
    "audit AS (INSERT INTO job_events (job_id, event, detail, created_at) "
    "SELECT e.job_id, e.event, e.detail, m.updated_at FROM unnest($2::varchar[], $4::int[], $11::varchar[], "
    "$12::json[]) AS e(job_id, runs, event, detail) JOIN moved AS m ON m.id = e.job_id AND m.runs = e.runs), "
    "staged AS (INSERT INTO outbox (exchange, routing_key, body, headers, priority, message_id, job_id, created_at) "
    "SELECT o.exchange, o.routing_key, o.body, o.headers, o.priority, o.message_id, NULL, $1 "
    "FROM unnest($13::varchar[], $14::varchar[], $15::bytea[], $16::json[], $17::int[], $18::varchar[], "
    "$2::varchar[], $4::int[]) WITH ORDINALITY "
    "AS o(exchange, routing_key, body, headers, priority, message_id, owner, runs, n) "
    "WHERE (o.owner, o.runs) IN (SELECT id, runs FROM moved) ORDER BY o.n RETURNING id, message_id)"
)


def finish_result(follows: bool = False) -> str:
    """The finish's result: the moved (id, runs), and each staged event's outbox id beside its message id; with
    `follows`, a column for what follows in a workflow, NULL in these rows (postgres_follow.py adds its own)."""
    extra = (", NULL::varchar AS follows", ", NULL") if follows else ("", "")
    return (
        f"SELECT id AS job_id, runs, NULL::varchar AS message_id, NULL::bigint AS outbox_id{extra[0]} FROM moved "
        f"UNION ALL SELECT NULL, NULL, message_id, id{extra[1]} FROM staged"
    )


FINISH_RECORDED = FINISH_CTES + " " + finish_result()


JSON_COLUMNS = ("payload", "result", "error", "depends_on", "progress")


def json_parsed(row: dict[str, Any]) -> dict[str, Any]:
    """A jobs row as the driver gave it (a statement sent as text), its JSON columns (text there) parsed."""
    for name in JSON_COLUMNS:
        if isinstance(row.get(name), str):
            row[name] = loads(row[name])
    return row


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
    ("held", "varchar"),
    ("concurrency_key", "varchar"),
    ("concurrency_limit", "int"),
    ("rate_key", "varchar"),
    ("rate_starts", "int"),
    ("rate_period", "float8"),
    ("granted_run", "int"),
    ("granted_at", "timestamptz"),
    ("held_until", "timestamptz"),
    ("workflow_id", "varchar"),
    ("ref", "varchar"),
    ("depends_on", "json"),
    ("deps_left", "int"),
    ("unique_key", "varchar"),
    ("unique_seconds", "int"),
    ("unique_live", "varchar"),
    ("progress", "json"),
)
INSERT_JOBS = (
    f"INSERT INTO jobs ({', '.join(name for name, _ in JOB_COLUMNS)}) SELECT * FROM unnest("
    + ", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(JOB_COLUMNS, start=1))
    + ")"
)


# New jobs with their audit rows and their outbox rows as one statement (a transaction by itself when sent alone).
SAVE_JOBS = "WITH new_jobs AS (" + shifted(INSERT_JOBS, 12) + "), " + INSERT_EVENTS_AND_OUTBOX.removeprefix("WITH ")


# -- a claim batch as one statement -------------------------------------------------------------------------
# The audit rows and events of the jobs a claim moves are built here, in SQL, from the rows as moved, so the
# whole batch is one statement (a transaction by itself: no BEGIN, no COMMIT, no second statement for the rows
# that follow from the first). The event body is the same bytes as `messages.job_event` builds in Python
# (compact JSON, its keys in its order, datetimes as ISO 8601 in UTC); tests/stores/test_pg_claim.py holds the two
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
    + " || ',' || ".join(f"'\"{name}\":' || {_json_text('m.' + name, _KINDS[name])}" for name in JOB_FIELDS)
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
    statement's placeholders for those values."""
    return recorded_ctes(now, exchange) + " SELECT * FROM recorded ORDER BY id, seq"


def recorded_ctes(now: str, exchange: str) -> str:
    """`_recorded`'s CTEs, the last of them `recorded` (the rows with their events). An audit row takes its row's
    `updated_at`: the move's stamp, which is `now` unless the job's last change is later (moves.stamped)."""
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
        "RETURNING id, routing_key, body, headers, message_id), "
        "recorded AS (SELECT m.*, s.id AS outbox_id, s.routing_key AS event_key, s.body AS event_body, "
        "s.headers AS event_headers, s.message_id AS event_id "
        "FROM moved AS m JOIN staged AS s ON s.message_id = " + _EVENT_ID + ")"
    )


# A held job (`held`, DESIGN.md rule 18) is never claimed: its release sends its message again.
# The claim and the confirmation lock their rows first, in id order (`ORDER BY id FOR UPDATE`): a statement
# that waited for the other's lock reads the row as that one left it (a claim waiting on the job's pending ->
# queued step claims it from queued, where a plain UPDATE would compare with the status it read before waiting,
# lose, and leave the job to a claim of its own in another transaction), and two batches holding the same jobs
# lock them in the same order, so they cannot deadlock.
def claim_moves(chosen: str) -> str:
    """The step CLAIM's CTEs `claimed` and `moved` (with its queued step for a pending job) for the jobs `chosen`
    names (a condition on the jobs' `id`); $2 is the lease, $3 now."""
    return (
        f"claimed AS (UPDATE jobs SET status = '{steps.CLAIM.target}', "
        "attempts = jobs.attempts + 1, runs = jobs.runs + 1, "
        "seq = jobs.seq + CASE WHEN was.status = 'pending' THEN 2 ELSE 1 END, lease_until = $2, "
        "next_attempt_at = NULL, started_at = coalesce(jobs.started_at, $3), "
        "updated_at = greatest($3, jobs.updated_at) "
        f"FROM (SELECT id, status FROM jobs WHERE {chosen} AND " + steps.CLAIM.sql_guard() + " "
        "AND held IS NULL ORDER BY id FOR UPDATE) AS was "
        "WHERE jobs.id = was.id AND jobs.attempts < jobs.max_retries + 1 "
        "RETURNING jobs.*, was.status AS was), "
        "moved AS (SELECT " + ", ".join(f"c.{name}" for name in _JOB_NAMES) + ", 'queued'::varchar AS source "
        "FROM claimed AS c UNION ALL SELECT "
        + ", ".join(f"{_QUEUED_STEP.get(name, 'c.' + name)} AS {name}" for name in _JOB_NAMES)
        + ", 'pending'::varchar FROM claimed AS c WHERE c.was = 'pending')"
    )


CLAIM_RECORDED = "WITH " + claim_moves("id = ANY($1::varchar[])") + ", " + _recorded("$3", "$4")
# pending -> queued for the jobs whose messages the broker confirmed, with their audit rows and events, and the
# confirmed outbox rows deleted, as one statement (the API's and the relay's confirmations): the step QUEUE.
# CLAIM_RECORDED makes the same move, recorded the same way, for a job whose message reached a worker before its
# confirmation: those are the two places it is written here.
QUEUE_RECORDED = (
    f"WITH moved AS (UPDATE jobs SET status = '{steps.QUEUE.target}', seq = jobs.seq + 1, "
    "updated_at = greatest($2, jobs.updated_at) "
    "FROM (SELECT id FROM jobs WHERE id = ANY($1::varchar[]) AND "
    + steps.QUEUE.sql_guard()
    + " ORDER BY id FOR UPDATE) AS p "
    "WHERE jobs.id = p.id AND "
    + steps.QUEUE.sql_guard()
    + " RETURNING "
    + ", ".join(f"jobs.{name}" for name in _JOB_NAMES)
    + ", 'pending'::varchar AS source), "
    "gone AS (DELETE FROM outbox WHERE id = ANY($4::bigint[])), " + _recorded("$2", "$3")
)
