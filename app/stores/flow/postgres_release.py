"""The release of a run's key on PostgreSQL as two statements with no BEGIN or COMMIT (DESIGN.md rules 17 and 18):
a look that reads the oldest jobs held for each key (as many as its limit could let start), whose lane messages are
then built here; then one statement that locks the keys, grants those that fit and stages their messages.

As with the claim's admission (jobs/postgres_admit.py), the statement reads the jobs in the snapshot it takes when it
starts but locks its keys' rows later, so it decides only the keys whose `flow_keys` version in its snapshot is the
one it locked. Those it leaves to the caller's transaction (flow/sql.py's release of keys): a key another decision
changed meanwhile, one whose held jobs that fit have a rate key too, or one with a held job that fits but was not
looked at (held since the look)."""

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from app.core.broker import Outgoing
from app.core.messages import loads
from app.models.rows import JobRow, job_row
from app.stores.flow import KeyRef, Looked
from app.stores.flow.postgres_keys import LIVE_SQL, judged_held, seen_and_locked
from app.stores.jobs.postgres_sql import json_parsed
from app.stores.outbox import Pending, rows_of
from app.stores.outbox.postgres import outbox_columns

# $1, $2 the keys' clients and names, $3 how many keys (and jobs of a key) at most, $4 now. Whether a held job's rate
# window has passed, and the oldest jobs held for each of these keys that has any, up to its limit: a row of NULLs
# beside `due` if none is.
LOOK = """
SELECT w.due, h.* FROM
  (SELECT EXISTS (SELECT 1 FROM jobs WHERE held = 'rate' AND held_until <= $4) AS due) AS w
  LEFT JOIN (
    SELECT j.* FROM (
      SELECT j.client_id, j.concurrency_key AS key, max(j.concurrency_limit) AS lim
      FROM jobs j JOIN unnest($1::text[], $2::text[]) AS r(client_id, key)
        ON j.client_id = r.client_id AND j.concurrency_key = r.key
      WHERE j.held = 'concurrency' AND j.concurrency_key IS NOT NULL AND j.finished_at IS NULL
      GROUP BY 1, 2 ORDER BY 1, 2 LIMIT $3
    ) AS k,
    LATERAL (
      SELECT * FROM jobs j WHERE j.client_id = k.client_id AND j.concurrency_key = k.key
        AND j.concurrency_key IS NOT NULL AND j.finished_at IS NULL AND j.held = 'concurrency'
      ORDER BY j.created_at, j.id LIMIT least($3, k.lim)
    ) AS j
  ) AS h ON true
"""

# $1, $2 the keys, $3 now, $4 now less a lease, $5 how many jobs of a key at most, $6 the jobs looked at, $7-$12
# their lane messages (exchange, routing key, body, headers, priority, message id), in the order of $6. Each key's
# slots in use and its oldest held jobs, as flow/postgres.py's RELEASE_PLAIN counts and ranks them; those that fit
# granted and their messages staged. The staged rows (outbox id, message id), each with the keys left undecided (a
# row of NULLs beside them if nothing was staged).
RELEASE_LOOKED = f"""
WITH refs AS (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS r(client_id, key)),
{seen_and_locked("refs")},
fresh AS MATERIALIZED (
  SELECT l.client_id, l.key FROM locked l
  JOIN seen s ON s.client_id = l.client_id AND s.key = l.key AND s.version = l.version
),
{judged_held("fresh")},
left_over AS MATERIALIZED (
  SELECT r.client_id, r.key FROM refs r
  WHERE NOT EXISTS (SELECT 1 FROM fresh f WHERE f.client_id = r.client_id AND f.key = r.key)
     OR EXISTS (SELECT 1 FROM judged d WHERE d.client_id = r.client_id AND d.key = r.key AND d.fits
                AND (d.slow OR d.id <> ALL($6::text[])))
),
granted AS (
  UPDATE jobs SET held = NULL, held_until = NULL, granted_run = jobs.runs + 1, granted_at = $3 FROM judged
  WHERE jobs.id = judged.id AND judged.fits AND NOT judged.slow AND judged.id = ANY($6::text[])
    AND NOT EXISTS (SELECT 1 FROM left_over o WHERE o.client_id = judged.client_id AND o.key = judged.key)
    AND jobs.held = 'concurrency' AND jobs.status IN {LIVE_SQL}
  RETURNING jobs.id
),
staged AS (
  INSERT INTO outbox (exchange, routing_key, body, headers, priority, message_id, job_id, created_at)
  SELECT m.exchange, m.routing_key, m.body, m.headers, m.priority, m.message_id, NULL, $3
  FROM unnest($6::text[], $7::varchar[], $8::varchar[], $9::bytea[], $10::json[], $11::int[], $12::varchar[])
    WITH ORDINALITY AS m(job_id, exchange, routing_key, body, headers, priority, message_id, n)
  WHERE m.job_id IN (SELECT id FROM granted) ORDER BY m.n
  RETURNING id, message_id
)
SELECT s.id AS outbox_id, s.message_id, o.left_over FROM
  (SELECT jsonb_agg(jsonb_build_array(client_id, key)) AS left_over FROM left_over) AS o
  LEFT JOIN staged s ON true
"""


def looked_at(found: Sequence[Mapping[str, Any]]) -> Looked:
    """LOOK's rows, read."""
    jobs = [job_row(json_parsed({k: v for k, v in row.items() if k != "due"})) for row in found if row["id"]]
    return Looked(bool(found[0]["due"]), jobs)


def granted_now(job: JobRow, now: datetime) -> JobRow:
    """A job looked at, as it is once RELEASE_LOOKED grants it at `now`: its message says until when the grant holds."""
    return cast(JobRow, {**job, "granted_at": now, "granted_run": job["runs"] + 1})


def release_params(
    jobs: list[JobRow], messages: list[Outgoing], now: datetime, lease: timedelta, limit: int
) -> tuple[Any, ...]:
    """RELEASE_LOOKED's parameters: the jobs looked at and the lane messages they would go with."""
    refs = sorted({KeyRef.of(job) for job in jobs})
    columns = outbox_columns(rows_of(messages, now))[:6]
    ids = [job["id"] for job in jobs]
    return ([c for c, _ in refs], [k for _, k in refs], now, now - lease, limit, ids, *columns)


def released(found: Sequence[Mapping[str, Any]], messages: list[Outgoing]) -> tuple[list[Pending], list[KeyRef]]:
    """RELEASE_LOOKED's rows, read: the messages it staged, and the keys it left to the caller."""
    by_id = {message.message_id: message for message in messages}
    staged = [Pending(int(row["outbox_id"]), by_id[row["message_id"]]) for row in found if row["outbox_id"]]
    left = found[0]["left_over"]
    left = loads(left) if isinstance(left, str) else left  # asyncpg's text, or decoded
    return staged, sorted(KeyRef(client_id, key) for client_id, key in left or [])
