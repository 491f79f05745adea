"""The deliveries store's PostgreSQL statements (deliveries, attempts, their audit rows) as one statement text
whatever the batch size, sent through `app.stores.postgres.rows`."""

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
DELIVERY_NAMES = [part.split()[0] for part in DELIVERY_COLUMNS.split(", ")]
INSERT_DELIVERIES = (
    f"INSERT INTO deliveries ({', '.join(DELIVERY_NAMES)}) SELECT * FROM unnest("
    + ", ".join(f"${i}::{part.split()[1]}[]" for i, part in enumerate(DELIVERY_COLUMNS.split(", "), start=1))
    + ")"
)

# The active endpoints of some clients, in the order they were registered (as the portable store reads them),
# for a fan-out batch to match its events against.
SUBSCRIBED_ENDPOINTS = (
    "SELECT id, client_id, url, events, job_type, job_id FROM webhook_endpoints "
    "WHERE client_id = ANY($1::varchar[]) AND active AND deleted_at IS NULL ORDER BY created_at, id"
)

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
            start=len(DELIVERY_NAMES) + 1,
        )
    )
    + ") WITH ORDINALITY AS o(exchange, routing_key, body, headers, priority, message_id, created_at, owner, n) "
    "WHERE o.owner IN (SELECT id FROM inserted) ORDER BY o.n RETURNING id, message_id"
)
