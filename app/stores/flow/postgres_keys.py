"""SQL text that PostgreSQL's statements deciding about concurrency keys share: the live statuses, and the lock of the
keys' `flow_keys` rows beside their versions as the statement's snapshot has them.

A statement reads every table in the snapshot it takes when it starts but locks its keys' rows later, so a decision
about a key that committed in between is missing from what it reads. Every decision about a key bumps the key's
version (BUMP here, locks.lock_keys elsewhere), so such a statement decides only the keys whose version in its
snapshot (`seen`) is the one it locked (`locked`), and leaves the others to a transaction of their own."""

from app.stores.flow.statements import LIVE

LIVE_SQL = "(" + ", ".join(f"'{status}'" for status in LIVE) + ")"

# Bumps the versions of `locked`'s rows of flow_keys: every decision about a key bumps its version.
BUMP = (
    "bumped AS (UPDATE flow_keys f SET version = f.version + 1 FROM locked l "
    "WHERE f.client_id = l.client_id AND f.kind = l.kind AND f.key = l.key)"
)


def seen_and_locked(wanted: str) -> str:
    """The CTEs `seen` (each concurrency key of CTE `wanted`'s (client_id, key) rows with its version in the
    snapshot), `locked` (the same rows locked in one order, as locks.lock_keys locks them, with their versions now)
    and BUMP's `bumped`."""
    return f"""seen AS MATERIALIZED (
  SELECT f.client_id, f.key, f.version FROM {wanted} w
  JOIN flow_keys f ON f.client_id = w.client_id AND f.kind = 'concurrency' AND f.key = w.key
),
locked AS MATERIALIZED (
  SELECT k.client_id, k.kind, k.key, k.version FROM {wanted} w
  JOIN LATERAL (SELECT * FROM flow_keys f WHERE f.client_id = w.client_id AND f.kind = 'concurrency' AND f.key = w.key)
    AS k ON true
  ORDER BY k.client_id, k.kind, k.key FOR UPDATE OF k
),
{BUMP}"""


def judged_held(keys: str) -> str:
    """The CTEs `counts` (each key of CTE `keys`' (client_id, key) rows with its slots in use: its runs with a live
    lease and its fresh grants, $3 now and $4 now less a lease), `held` (its oldest $5 jobs held for a slot, ranked)
    and `judged`: whether each held job fits (the n-th needs taken + n <= its limit, and every one before it fits),
    and whether its key is `slow` up to it (a held job with a rate key too goes job by job)."""
    return f"""counts AS MATERIALIZED (
  SELECT r.client_id, r.key, c.taken FROM {keys} r,
  LATERAL (
    SELECT count(*) FILTER (WHERE (j.status = 'running' AND j.lease_until > $3)
                            OR (j.granted_run = j.runs + 1 AND j.granted_at > $4 AND j.status IN {LIVE_SQL})) AS taken
    FROM jobs j WHERE j.client_id = r.client_id AND j.concurrency_key = r.key
      AND j.concurrency_key IS NOT NULL AND j.finished_at IS NULL
  ) AS c
),
held AS MATERIALIZED (
  SELECT r.client_id, r.key, h.id, h.lim, h.rate_key, h.place FROM {keys} r,
  LATERAL (
    SELECT j.id, j.concurrency_limit AS lim, j.rate_key, row_number() OVER (ORDER BY j.created_at, j.id) AS place
    FROM jobs j WHERE j.client_id = r.client_id AND j.concurrency_key = r.key AND j.concurrency_key IS NOT NULL
      AND j.finished_at IS NULL AND j.held = 'concurrency'
    ORDER BY j.created_at, j.id LIMIT $5
  ) AS h
),
judged AS MATERIALIZED (
  SELECT h.id, h.client_id, h.key, bool_or(h.rate_key IS NOT NULL) OVER w AS slow,
         max(h.place - COALESCE(h.lim, 0)) OVER w <= -COALESCE(c.taken, 0) AS fits
  FROM held h LEFT JOIN counts c ON c.client_id = h.client_id AND c.key = h.key
  WINDOW w AS (PARTITION BY h.client_id, h.key ORDER BY h.place ROWS UNBOUNDED PRECEDING)
)"""
