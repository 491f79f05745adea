"""A claim batch with keyed jobs on PostgreSQL as one statement: the admission of the jobs with a concurrency key
alone, and the claim, with no BEGIN or COMMIT (DESIGN.md rules 17 and 18).

A statement reads every table in one snapshot, taken when it starts, while it locks its keys' `flow_keys` rows
later; a decision that committed between the two would not be in the slots it counts. So every decision about a
key bumps the key's version (flow/postgres.py's BUMP, locks.lock_keys), and this statement decides only the keys
whose version in its snapshot is the one it locked. The jobs of any other key (another batch decided on it
meanwhile, its row is not made yet, or the job has a rate key too) are left undecided: the caller admits them as
before, in a transaction of their own (flow/postgres.py's admit_in).

A job granted here is claimed here, from pending or queued: running with its lease, it holds its slot with no grant
written. One granted from another status (a due retry, a lease run out) is taken over after this by the claim's
next step (workers/jobs/claims.py's claim_rest): it holds a grant until then."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from app.core.messages import loads
from app.stores.flow.postgres import HOLD, JUDGE, waiting_where
from app.stores.flow.postgres_keys import LIVE_SQL, seen_and_locked
from app.stores.jobs.postgres_sql import claim_moves, recorded_ctes
from app.stores.postgres import shifted

# $1 the batch's jobs, $2 the lease, $3 now, $4 the events' exchange; $5 its keyed jobs, $6 now, $7 now less a lease.
ADMIT_AND_CLAIM = f"""
WITH waiting AS MATERIALIZED (
  SELECT j.id, j.client_id, j.concurrency_key, j.concurrency_limit, j.rate_key, j.created_at, j.status
  FROM jobs j WHERE {waiting_where("$5", "$6", "$7")}
),
wanted AS (
  SELECT DISTINCT client_id, concurrency_key AS key FROM waiting WHERE concurrency_key IS NOT NULL AND rate_key IS NULL
),
{seen_and_locked("wanted")},
batch AS MATERIALIZED (
  SELECT w.id, w.client_id, w.concurrency_key AS key, w.concurrency_limit AS lim, w.created_at, w.status
  FROM waiting w
  JOIN locked l ON l.client_id = w.client_id AND l.key = w.concurrency_key
  JOIN seen s ON s.client_id = l.client_id AND s.key = l.key AND s.version = l.version
  WHERE w.rate_key IS NULL AND w.status IN {LIVE_SQL}
),
{shifted(JUDGE, 4)},
{shifted(HOLD, 4)},
grants AS (
  UPDATE jobs SET granted_run = jobs.runs + 1, granted_at = $6 FROM judged JOIN batch b ON b.id = judged.id
  WHERE jobs.id = judged.id AND judged.granted AND b.status NOT IN ('pending', 'queued')
    AND jobs.held IS NULL AND jobs.status IN {LIVE_SQL}
),
claimable AS (
  SELECT t.id FROM unnest($1::varchar[]) AS t(id) WHERE t.id NOT IN (SELECT id FROM waiting)
  UNION ALL
  SELECT b.id FROM judged JOIN batch b ON b.id = judged.id WHERE judged.granted AND b.status IN ('pending', 'queued')
),
{claim_moves("id IN (SELECT id FROM claimable)")},
{recorded_ctes("$3", "$4")}
SELECT r.*, a.held, a.undecided FROM (
  SELECT (SELECT json_agg(json_build_array(h.id, h.client_id, h.concurrency_key)) FROM holds h) AS held,
         (SELECT array_agg(w.id) FROM waiting w WHERE w.id NOT IN (SELECT id FROM batch)) AS undecided
) AS a LEFT JOIN recorded r ON true
ORDER BY r.id, r.seq
"""


class Held(NamedTuple):
    """A job the statement held for its concurrency key."""

    job_id: str
    client_id: str
    key: str


class AdmittedClaim(NamedTuple):
    """What ADMIT_AND_CLAIM did: the claim's rows (as CLAIM_RECORDED's), the jobs it held, and the keyed jobs it
    left undecided."""

    rows: list[dict[str, Any]]
    held: list[Held]
    undecided: list[str]


def params(
    job_ids: list[str], keyed: list[str], now: datetime, lease: datetime, since: datetime, exchange: str
) -> tuple[Any, ...]:
    """ADMIT_AND_CLAIM's parameters."""
    return (job_ids, lease, now, exchange, keyed, now, since)


def parsed(result: Sequence[Any]) -> AdmittedClaim:
    """ADMIT_AND_CLAIM's rows, read."""
    first = result[0]  # the statement returns a row even when it claims nothing
    held = loads(first["held"]) if isinstance(first["held"], str) else first["held"]  # asyncpg's text, or decoded
    held = [Held(*one) for one in held or []]
    rows = [dict(row) for row in result if row["id"] is not None]
    for row in rows:
        del row["held"], row["undecided"]
    return AdmittedClaim(rows, held, list(first["undecided"] or []))
