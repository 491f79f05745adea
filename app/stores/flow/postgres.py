"""Flow control's hot statements on PostgreSQL (rule 14's marked place for such SQL), each one statement text
whatever the batch (arrays, unnested), prepared once per connection: fair turns' count of every client and lane of
a submit flush (the portable UNION ALL of `fair.state_read` is a statement of its own for each number of clients,
planned each time, and SQLAlchemy builds it each time: about 240 µs a client here, against a few µs), and the
admission of a batch of jobs with concurrency keys (the portable one builds an OR of its keys for each statement)."""

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import LANE_PRIORITIES, Names
from app.models.claims import insert_missing
from app.models.rows import JobRow
from app.models.tables import FLOW_KEYS
from app.stores import postgres
from app.stores.flow import KeyRef
from app.stores.flow.fair import LaneRef, LaneState, SqlFairness
from app.stores.flow.sql import SqlFlow
from app.stores.flow.statements import CONCURRENCY, Hold
from app.stores.outbox import OutboxStore, Pending
from app.stores.postgres import PgConnections

# The predicates are the partial indexes' own, as constants: ix_jobs_waiting's, then ix_jobs_fair's.
LANES = """
SELECT r.i,
       (SELECT count(*) FROM (SELECT 1 FROM jobs
         WHERE client_id = r.client_id AND priority BETWEEN r.lo AND r.hi
           AND status IN ('pending', 'queued') AND held IS NULL LIMIT $4) AS counted) AS in_lane,
       EXISTS (SELECT 1 FROM jobs
         WHERE client_id = r.client_id AND priority BETWEEN r.lo AND r.hi
           AND held = 'fair' AND status IN ('pending', 'queued')) AS backlog
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


# A batch's concurrency keys locked in one order (client, kind, key: `statements.lock_keys`'s), each key's row made
# first if it has none (`insert_missing`, rare: a key's first admission).
LOCK_KEYS = """
SELECT f.client_id, f.key FROM flow_keys f
JOIN unnest($1::text[], $2::text[]) AS wanted(client_id, key) ON f.client_id = wanted.client_id AND f.key = wanted.key
WHERE f.kind = 'concurrency'
ORDER BY f.client_id, f.kind, f.key
FOR UPDATE OF f
"""
# Under the keys' locks (a statement of its own: its snapshot sees every admission that held them before), each
# job of the batch, oldest first within its key, granted while its key has a free slot and no older job waits,
# held otherwise with its `throttled` row the first time: `SqlFlow._admit_plain` as one statement. A slot is
# taken by a run with a live lease or a fresh grant its claim has not used (`statements.occupying`).
ADMIT = """
WITH batch AS (
    SELECT id, client_id, concurrency_key, concurrency_limit,
           row_number() OVER (PARTITION BY client_id, concurrency_key ORDER BY created_at, id) AS place
    FROM jobs WHERE id = ANY($1::text[])
), counts AS (
    SELECT client_id, concurrency_key,
           count(*) FILTER (WHERE (status = 'running' AND lease_until > $2)
                             OR (granted_run = runs + 1 AND granted_at > $3
                                 AND status IN ('pending', 'queued', 'retrying', 'running'))) AS taken,
           count(*) FILTER (WHERE held = 'concurrency') AS waiting
    FROM jobs
    WHERE (client_id, concurrency_key) IN (SELECT client_id, concurrency_key FROM batch) AND finished_at IS NULL
    GROUP BY client_id, concurrency_key
), decided AS (
    SELECT b.id, b.concurrency_key,
           coalesce(c.waiting, 0) = 0 AND coalesce(c.taken, 0) + b.place <= b.concurrency_limit AS granted
    FROM batch b LEFT JOIN counts c ON c.client_id = b.client_id AND c.concurrency_key = b.concurrency_key
), granted AS (
    UPDATE jobs SET granted_run = jobs.runs + 1, granted_at = $2
    FROM decided d
    WHERE jobs.id = d.id AND d.granted AND jobs.held IS NULL
      AND jobs.status IN ('pending', 'queued', 'retrying', 'running')
    RETURNING jobs.id
), held AS (
    UPDATE jobs SET held = 'concurrency', held_until = NULL
    FROM decided d
    WHERE jobs.id = d.id AND NOT d.granted AND jobs.held IS NULL
      AND jobs.status IN ('pending', 'queued', 'retrying', 'running')
    RETURNING jobs.id, jobs.concurrency_key
), trail AS (
    INSERT INTO job_events (job_id, event, detail, created_at)
    SELECT h.id, 'throttled', json_build_object('key', h.concurrency_key, 'reason', 'concurrency'), $2
    FROM held h
    WHERE NOT EXISTS (SELECT 1 FROM job_events e WHERE e.job_id = h.id AND e.event = 'throttled')
)
SELECT id FROM held
"""


class PgFlow(SqlFlow):
    """Admission of a batch whose jobs have a concurrency key and no rate key (the common keyed batch) in two
    statements sent as driver SQL, one text whatever the batch: the ordered lock, then `ADMIT`. A batch with a
    rate key goes the portable way, job by job for its windows."""

    async def _admit_todo(
        self, conn: AsyncConnection, todo: list[JobRow], now: datetime
    ) -> tuple[dict[str, Hold], list[Pending]]:
        if any(job["rate_key"] is not None for job in todo):
            return await super()._admit_todo(conn, todo, now)
        refs = sorted({KeyRef(job["client_id"], job["concurrency_key"] or "") for job in todo})
        lock = ([ref.client_id for ref in refs], [ref.key for ref in refs])
        if len(await postgres.rows(conn, LOCK_KEYS, lock)) < len(refs):
            for ref in refs:  # a key's first admission: its row made, then every row locked in order
                row = {"client_id": ref.client_id, "kind": str(CONCURRENCY), "key": ref.key, "version": 0}
                await conn.execute(insert_missing("postgresql", FLOW_KEYS, row))
            await postgres.rows(conn, LOCK_KEYS, lock)
        found = await postgres.rows(conn, ADMIT, ([job["id"] for job in todo], now, now - self.lease))
        keys = {job["id"]: job["concurrency_key"] or "" for job in todo}
        return {row["id"]: Hold(CONCURRENCY, keys[row["id"]]) for row in found}, []
