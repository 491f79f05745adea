"""Flow control's statements on PostgreSQL (rule 14's marked place for such SQL), each one text whatever the
number of clients or keys (arrays, unnested), prepared once per connection. Fair turns' count: every client and
lane of a submit flush in one statement; the portable UNION ALL of `fair.state_read` is a statement of its own for
each number of clients, planned each time, and SQLAlchemy builds it each time (about 240 µs a client here, against
a few µs). Concurrency keys' admission and the look before a release (below)."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.messages import loads
from app.core.names import LANE_PRIORITIES, Names
from app.models.job import IN_LANE_WHERE, WAITS_TURN_WHERE
from app.models.rows import JobRow, job_row
from app.models.tables import JOBS
from app.models.types import utcnow
from app.stores import postgres
from app.stores.flow import Admission, KeyRef, Looked
from app.stores.flow.fair import LaneRef, LaneState, SqlFairness
from app.stores.flow.locks import lock_keys
from app.stores.flow.postgres_keys import BUMP, LIVE_SQL, judged_held
from app.stores.flow.postgres_release import LOOK, RELEASE_LOOKED, granted_now, looked_at, release_params, released
from app.stores.flow.sql import Admitted, SqlFlow
from app.stores.flow.statements import CONCURRENCY, C, Hold, key_locks
from app.stores.jobs.postgres_sql import json_parsed
from app.stores.outbox import OutboxStore, Pending
from app.stores.postgres import PgConnections

# The predicates are the partial indexes' own texts: ix_jobs_waiting's, then ix_jobs_fair's.
LANES = f"""
SELECT r.i,
       (SELECT count(*) FROM (SELECT 1 FROM jobs
         WHERE client_id = r.client_id AND priority BETWEEN r.lo AND r.hi AND {IN_LANE_WHERE} LIMIT $4) AS counted)
         AS in_lane,
       EXISTS (SELECT 1 FROM jobs
         WHERE client_id = r.client_id AND priority BETWEEN r.lo AND r.hi AND {WAITS_TURN_WHERE}) AS backlog
FROM unnest($1::text[], $2::int[], $3::int[]) WITH ORDINALITY AS r(client_id, lo, hi, i)
"""


class PgFairness(SqlFairness):
    def __init__(self, engine: AsyncEngine, names: Names, outbox: OutboxStore, connections: PgConnections) -> None:
        super().__init__(engine, names, outbox)
        self.connections = connections

    async def lanes(self, refs: Sequence[LaneRef], cap: int) -> dict[LaneRef, LaneState]:
        """See FairStore.lanes: one statement, a transaction by itself."""
        async with self.connections.autocommit() as conn:
            return await self.states(conn, refs, cap)

    async def states(self, conn: AsyncConnection, refs: Sequence[LaneRef], cap: int) -> dict[LaneRef, LaneState]:
        if not refs:
            return {}
        ranges = [LANE_PRIORITIES[ref.lane] for ref in refs]
        params = ([r.client_id for r in refs], [p.start for p in ranges], [p.stop - 1 for p in ranges], cap)
        found = await postgres.rows(conn, LANES, params)
        return {refs[row["i"] - 1]: LaneState(int(row["in_lane"]), bool(row["backlog"])) for row in found}


# -- concurrency keys' admission ----------------------------------------------------------------------------------
# A keyed job waits to start (statements.ready, not holds_grant): the claim's own jobs of `jobs AS j` among the ids
# of `ids`, `now` and `since` the statement's placeholders.
def waiting_where(ids: str, now: str, since: str) -> str:
    return (
        f"j.id = ANY({ids}::text[]) AND j.held IS NULL AND (j.concurrency_key IS NOT NULL OR j.rate_key IS NOT NULL) "
        f"AND (j.status IN ('pending', 'queued') "
        f"OR (j.status = 'retrying' AND (j.next_attempt_at IS NULL OR j.next_attempt_at <= {now})) "
        f"OR (j.status = 'running' AND j.lease_until < {now})) "
        f"AND NOT (j.granted_run IS NOT NULL AND j.granted_run = j.runs + 1 AND j.granted_at IS NOT NULL "
        f"AND j.granted_at > {since})"
    )


# The batch's jobs that wait to start, with their keys' rows locked and bumped; `locked` counts the rows found, so
# a key with no row yet is seen.
LOCK_WAITING = f"""
WITH waiting AS MATERIALIZED (
  SELECT j.id, j.client_id, j.concurrency_key, j.rate_key, j.created_at FROM jobs j
  WHERE {waiting_where("$1", "$2", "$3")}
),
wanted AS (
  SELECT 'concurrency' AS kind, client_id, concurrency_key AS key FROM waiting WHERE concurrency_key IS NOT NULL
  UNION SELECT 'rate', client_id, rate_key FROM waiting WHERE rate_key IS NOT NULL
),
locked AS MATERIALIZED (
  SELECT k.client_id, k.kind, k.key FROM wanted w
  JOIN LATERAL (SELECT * FROM flow_keys f WHERE f.client_id = w.client_id AND f.kind = w.kind AND f.key = w.key) AS k
    ON true
  ORDER BY k.client_id, k.kind, k.key FOR UPDATE OF k
),
{BUMP}
SELECT t.id, t.client_id, t.concurrency_key, t.rate_key, (SELECT count(*) FROM locked) AS locked
FROM waiting t ORDER BY t.created_at, t.id
"""

# Jobs of `batch` (a CTE: id, client_id, key, lim, created_at), their keys locked, judged as sql.SqlFlow._admit_plain
# judges them: each key's slots in use and jobs waiting (the partial index ix_jobs_concurrency's rows); oldest first,
# a job is granted while every job of its key up to it fits its own limit (the n-th needs taken + n <= its limit)
# and none of the key waits. `judged` (id, granted).
JUDGE = f"""
counts AS MATERIALIZED (
  SELECT b.client_id, b.key, c.taken, c.waiting FROM (SELECT DISTINCT client_id, key FROM batch) AS b,
  LATERAL (
    SELECT count(*) FILTER (WHERE (j.status = 'running' AND j.lease_until > $2)
                            OR (j.granted_run = j.runs + 1 AND j.granted_at > $3 AND j.status IN {LIVE_SQL})) AS taken,
           count(*) FILTER (WHERE j.held = 'concurrency') AS waiting
    FROM jobs j WHERE j.client_id = b.client_id AND j.concurrency_key = b.key
      AND j.concurrency_key IS NOT NULL AND j.finished_at IS NULL
  ) AS c
),
ranked AS (
  SELECT id, client_id, key, created_at,
         row_number() OVER (PARTITION BY client_id, key ORDER BY created_at, id) - COALESCE(lim, 0) AS over
  FROM batch
),
judged AS MATERIALIZED (
  SELECT r.id, COALESCE(c.waiting, 0) = 0
         AND max(r.over) OVER (PARTITION BY r.client_id, r.key ORDER BY r.created_at, r.id
                               ROWS UNBOUNDED PRECEDING) <= -COALESCE(c.taken, 0) AS granted
  FROM ranked r LEFT JOIN counts c ON c.client_id = r.client_id AND c.key = r.key
)"""

# The holds of the jobs `judged` did not grant, a held job's `throttled` row the first time; `holds` (id, client_id,
# concurrency_key) the jobs held.
HOLD = f"""
holds AS (
  UPDATE jobs SET held = 'concurrency', held_until = NULL FROM judged
  WHERE jobs.id = judged.id AND NOT judged.granted AND jobs.held IS NULL AND jobs.status IN {LIVE_SQL}
  RETURNING jobs.id, jobs.client_id, jobs.concurrency_key
),
trail AS (
  INSERT INTO job_events (job_id, event, detail, created_at)
  SELECT h.id, 'throttled', json_build_object('key', h.concurrency_key, 'reason', 'concurrency'), $2 FROM holds h
  WHERE NOT EXISTS (SELECT 1 FROM job_events e WHERE e.job_id = h.id AND e.event = 'throttled')
)"""

# Jobs with a concurrency key alone, their keys locked: judged (JUDGE), the grants and the holds written. The jobs
# held.
ADMIT_PLAIN = f"""
WITH batch AS MATERIALIZED (
  SELECT id, client_id, concurrency_key AS key, concurrency_limit AS lim, created_at FROM jobs
  WHERE id = ANY($1::text[]) AND held IS NULL AND status IN {LIVE_SQL} AND concurrency_key IS NOT NULL
),
{JUDGE},
grants AS (
  UPDATE jobs SET granted_run = jobs.runs + 1, granted_at = $2 FROM judged
  WHERE jobs.id = judged.id AND judged.granted AND jobs.held IS NULL AND jobs.status IN {LIVE_SQL}
),
{HOLD}
SELECT id, client_id, concurrency_key FROM holds
"""


# Concurrency keys' rows locked in one order (locks.lock_keys') and bumped, as one statement: how many were found.
LOCK_CONCURRENCY = f"""
WITH locked AS MATERIALIZED (
  SELECT f.client_id, f.kind, f.key FROM flow_keys f
  JOIN (SELECT DISTINCT * FROM unnest($1::text[], $2::text[])) AS r(client_id, key)
    ON f.client_id = r.client_id AND f.kind = 'concurrency' AND f.key = r.key
  ORDER BY f.client_id, f.kind, f.key FOR UPDATE OF f
),
{BUMP}
SELECT count(*) AS locked FROM locked
"""

# The oldest jobs held for these keys' slots (the keys locked by an earlier statement), granted while each key has
# room, as sql.SqlFlow._release_keys grants them, in one statement: each key's slots in use, its oldest `$5` held
# jobs, and those that fit granted (the n-th needs taken + n <= its limit, and every one before it fits); a key
# whose held jobs have one with a rate key before they stop fitting is `slow`: its rest go job by job
# (SqlFlow._release_key). The jobs granted as they are now, each with the slow keys (a row of NULLs if none).
RELEASE_PLAIN = f"""
WITH refs AS (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS r(client_id, key)),
{judged_held("refs")},
granted AS (
  UPDATE jobs SET held = NULL, held_until = NULL, granted_run = jobs.runs + 1, granted_at = $3 FROM judged
  WHERE jobs.id = judged.id AND judged.fits AND NOT judged.slow AND jobs.held = 'concurrency'
    AND jobs.status IN {LIVE_SQL}
  RETURNING jobs.*
)
SELECT g.*, s.slow FROM
  (SELECT jsonb_agg(DISTINCT jsonb_build_array(client_id, key)) AS slow FROM judged WHERE slow AND fits) AS s
  LEFT JOIN granted g ON true
"""


class PgFlow(SqlFlow):
    """Concurrency keys' admission on PostgreSQL: the usual case (jobs with a concurrency key alone) in two fixed
    statements under one transaction, where the portable admission takes six, each compiled for its number of keys
    (the keyed drain's job worker spent a fifth of its time there). A job with a rate key goes the portable way."""

    def __init__(
        self, engine: AsyncEngine, names: Names, outbox: OutboxStore, lease_seconds: float, connections: PgConnections
    ) -> None:
        super().__init__(engine, names, outbox, lease_seconds)
        self.connections = connections

    async def look(self, keys: Sequence[KeyRef], limit: int) -> Looked | None:
        """See FlowStore.look: one statement (postgres_release.LOOK), a transaction by itself."""
        async with self.connections.autocommit() as conn:
            return await self._look(conn, keys, limit)

    async def _look(self, conn: AsyncConnection, keys: Sequence[KeyRef], limit: int) -> Looked:
        params = ([ref.client_id for ref in keys], [ref.key for ref in keys], limit, utcnow())
        return looked_at(await postgres.rows(conn, LOOK, params))

    async def _again(self, conn: AsyncConnection, keys: Sequence[KeyRef], limit: int, looked: Looked) -> Looked:
        """What `looked` read of these keys, for the keys it found held jobs of; the others looked at now: a job
        held since the look (an admission that counted the run this release follows as running) is not lost."""
        found, wanted = {KeyRef.of(job) for job in looked.jobs}, set(keys)
        jobs = [job for job in looked.jobs if KeyRef.of(job) in wanted]
        unseen = [ref for ref in keys if ref not in found]
        if not unseen:
            return Looked(looked.window_due, jobs)
        fresh = await self._look(conn, unseen, limit)
        return Looked(looked.window_due or fresh.window_due, jobs + fresh.jobs)

    async def release(
        self, keys: Sequence[KeyRef] | None, limit: int, looked: Looked | None = None
    ) -> tuple[int, list[Pending]]:
        """See FlowStore.release. For given keys (a run's end), two statements with no transaction: a look at their
        oldest held jobs (unless `looked` has it), then one that grants those that fit and stages their messages
        (postgres_release.py); the keys it leaves go in a transaction, as every key does elsewhere."""
        if keys is None:
            return await super().release(keys, limit)
        now = utcnow()
        staged: list[Pending] = []
        left: list[KeyRef] = []
        async with self.connections.autocommit() as conn:
            look = (
                await self._look(conn, keys, limit) if looked is None else await self._again(conn, keys, limit, looked)
            )
            if jobs := look.jobs:
                messages = self._messages([granted_now(job, now) for job in jobs])
                params = release_params(jobs, messages, now, self.lease, limit)
                found = await postgres.rows(conn, RELEASE_LOOKED, params)
                staged, left = released(found, messages)
        more, also = await self._release_in_transaction(left, now, limit)
        released_count, staged = len(staged) + more, staged + also
        if look.window_due:
            more, also = await self._release_due(now, limit)
            released_count, staged = released_count + more, staged + also
        return released_count, staged

    async def _lock_concurrency(self, conn: AsyncConnection, refs: Sequence[KeyRef]) -> None:
        """See SqlFlow._lock_concurrency: one statement, unless a key has no row yet."""
        found = await postgres.rows(conn, LOCK_CONCURRENCY, ([r.client_id for r in refs], [r.key for r in refs]))
        if found[0]["locked"] < len(set(refs)):  # made (and locked) the usual way
            await super()._lock_concurrency(conn, refs)

    async def _release_keys(
        self, conn: AsyncConnection, refs: Sequence[KeyRef], now: datetime, limit: int
    ) -> list[JobRow]:
        """See SqlFlow._release_keys: one statement (RELEASE_PLAIN), then job by job for a key with a rate key."""
        if not refs:
            return []
        params = ([r.client_id for r in refs], [r.key for r in refs], now, now - self.lease, limit)
        found = await postgres.rows(conn, RELEASE_PLAIN, params)
        slow = found[0]["slow"]
        slow = loads(slow) if isinstance(slow, str) else slow  # asyncpg's text, or decoded
        freed = [job_row(json_parsed({k: v for k, v in row.items() if k != "slow"})) for row in found if row["id"]]
        for client_id, key in sorted(slow or []):
            freed += await self._release_key(conn, KeyRef(client_id, key), now, limit)
        return freed

    async def admit_in(self, conn: AsyncConnection, job_ids: list[str]) -> Admission:
        """See FlowStore.admit_in. A key that may have room for a job this holds is released by the caller once
        this commits (`Admission.held_keys`), not here: every such key has a job held by this admission."""
        now = utcnow()
        since = now - self.lease
        waiting = await postgres.rows(conn, LOCK_WAITING, (job_ids, now, since))
        if not waiting:
            return Admission()
        wanted = {lock for job in waiting for lock in key_locks(job)}
        if waiting[0]["locked"] < len(wanted):  # a key's first admission: its row made (and locked) the usual way
            await lock_keys(conn, wanted)
        plain = [job["id"] for job in waiting if job["rate_key"] is None]
        found = await postgres.rows(conn, ADMIT_PLAIN, (plain, now, since)) if plain else []
        held = {row["id"]: Hold(CONCURRENCY, row["concurrency_key"]) for row in found}
        keys = {KeyRef(row["client_id"], row["concurrency_key"]) for row in found}
        rated = [job["id"] for job in waiting if job["rate_key"] is not None]
        if not rated:
            return Admission(set(held), [], None, keys)
        query = select(*JOBS.c).where(C.id.in_(rated)).order_by(C.created_at, C.id)
        jobs = [job_row(row._mapping) for row in await conn.execute(query)]
        return await self._admit_rated(conn, jobs, now, Admitted(held, set(), keys), len(waiting))
