"""Fair turns' count on PostgreSQL (rule 14's marked place for such SQL): every client and lane of a submit flush in
one statement text whatever their number (arrays, unnested), prepared once per connection; the portable UNION ALL
of `fair.state_read` is a statement of its own for each number of clients, planned each time, and SQLAlchemy builds
it each time (about 240 µs a client here, against a few µs)."""

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import LANE_PRIORITIES, Names
from app.models.job import IN_LANE_WHERE, WAITS_TURN_WHERE
from app.stores import postgres
from app.stores.flow.fair import LaneRef, LaneState, SqlFairness
from app.stores.outbox import OutboxStore
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
