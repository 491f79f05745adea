"""Fair turns in a lane (docs/flow-control.md), on every database SQLAlchemy speaks: how many of a client's jobs
wait in a lane's queue now, whether others wait their turn in the database (`held = 'fair'`), and the release of
the oldest of those as its share drains, their lane messages staged in the same transaction (rule 18).

A client's jobs in a lane are counted, not stored: its `pending` or `queued` jobs that are not held (the partial
index `ix_jobs_waiting`), counted up to a cap, so a count reads at most a share's worth of index entries. Releases
of a client's lane take turns under its `flow_keys` row; the bound is soft at the submit alone: two submits of one
client with nothing waiting may each see the same room, so a lane holds a little more than a client's share at
most, never its backlog."""

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    bindparam,
    case,
    func,
    literal,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.names import LANE_PRIORITIES, Lane, Names, lane_of
from app.core.statuses import HeldReason
from app.models.claims import skip_locked
from app.models.job import IN_LANE_WHERE, WAITS_TURN_WHERE
from app.models.rows import JobRow
from app.models.tables import JOBS
from app.stores.flow.locks import lock_keys
from app.stores.jobs.holds import lane_messages, release_in_order
from app.stores.outbox import OutboxStore, Pending

C = JOBS.c
FAIR = str(HeldReason.FAIR)


# A job in its lane's queue (or on its way there, or delivered and not claimed yet): ix_jobs_waiting's rows. A job
# waiting its turn in the database: ix_jobs_fair's rows. The indexes' own predicates, as constants: a prepared
# statement's generic plan cannot prove that a bound value satisfies a partial index's predicate, and scans.
IN_LANE = text(IN_LANE_WHERE)
WAITS_TURN = text(WAITS_TURN_WHERE)


class LaneRef(NamedTuple):
    """One client's jobs in one lane."""

    client_id: str
    lane: Lane


class LaneState(NamedTuple):
    in_lane: int  # its jobs in the lane now, counted up to the cap asked for
    backlog: bool  # whether some of its jobs wait their turn in the database


def of_lane(ref: LaneRef) -> ColumnElement[bool]:
    priorities = LANE_PRIORITIES[ref.lane]
    return and_(C.client_id == ref.client_id, C.priority.between(priorities.start, priorities.stop - 1))


def state_read(refs: Sequence[LaneRef], cap: int) -> Select[Any]:
    """One row per ref (its index, its jobs in the lane up to `cap`, 1 when some wait their turn): a UNION ALL of
    two bounded index reads per ref."""
    parts = []
    for index, ref in enumerate(refs):
        counted = select(literal(1).label("one")).where(of_lane(ref), IN_LANE).limit(cap).subquery()
        in_lane = select(func.count()).select_from(counted).scalar_subquery()
        backlog = case((select(C.id).where(of_lane(ref), WAITS_TURN).exists(), 1), else_=0)
        parts.append(select(literal(index).label("i"), in_lane.label("in_lane"), backlog.label("backlog")))
    return parts[0] if len(parts) == 1 else union_all(*parts)  # type: ignore[return-value]


async def lane_states(conn: AsyncConnection, refs: Sequence[LaneRef], cap: int) -> dict[LaneRef, LaneState]:
    if not refs:
        return {}
    rows = (await conn.execute(state_read(refs, cap))).all()
    return {refs[row.i]: LaneState(int(row.in_lane), bool(row.backlog)) for row in rows}


def next_turns(ref: LaneRef, room: int) -> Select[Any]:
    """Up to `room` of a client's jobs waiting their turn in a lane, by priority then submission, locked for the
    caller's transaction; rows another release holds are passed over (`skip_locked`). A read of its own: as the
    subquery of an UPDATE, PostgreSQL may run it again for rows the UPDATE already changed, and release them all."""
    turn = select(C.id).where(of_lane(ref), WAITS_TURN).order_by(C.priority, C.created_at).limit(room)
    return skip_locked(turn, JOBS)


# The compare-and-set of a release: a job cancelled meanwhile is left alone.
TAKE_TURNS = (
    update(JOBS).where(C.id.in_(bindparam("ids", expanding=True)), WAITS_TURN).values(held=None).returning(*JOBS.c)
)


BACKLOGS = select(C.client_id, C.priority).where(WAITS_TURN).group_by(C.client_id, C.priority)


class SqlFairness:
    def __init__(self, engine: AsyncEngine, names: Names, outbox: OutboxStore) -> None:
        self.engine = engine
        self.names = names
        self.outbox = outbox

    async def lanes(self, refs: Sequence[LaneRef], cap: int) -> dict[LaneRef, LaneState]:
        """See FairStore.lanes."""
        async with self.engine.connect() as conn:
            return await self.states(conn, refs, cap)

    async def states(self, conn: AsyncConnection, refs: Sequence[LaneRef], cap: int) -> dict[LaneRef, LaneState]:
        return await lane_states(conn, refs, cap)

    async def release(
        self, refs: Sequence[LaneRef] | None, share: Callable[[Lane], int], least: float = 0.0
    ) -> list[Pending]:
        """See FairStore.release."""
        async with self.engine.begin() as conn:
            if refs is None:
                backlogs = (await conn.execute(BACKLOGS)).all()
                refs = sorted({LaneRef(row.client_id, lane_of(row.priority)) for row in backlogs})
            # One release of a client's lane at a time, in every process: each counts the room after the one
            # before it committed, so two (a worker's and a sweep's) never both fill the same room.
            await lock_keys(conn, [(FAIR, ref.client_id, str(ref.lane)) for ref in refs])
            cap = max((share(ref.lane) for ref in refs), default=0)
            released: list[JobRow] = []
            for ref, state in (await self.states(conn, refs, cap)).items():
                room = share(ref.lane) - state.in_lane
                if state.backlog and room >= max(1, int(least * share(ref.lane))):
                    released += await _take_turns(conn, ref, room)
            return await self.outbox.stage(conn, lane_messages(self.names, released, fair=True))


async def _take_turns(conn: AsyncConnection, ref: LaneRef, room: int) -> list[JobRow]:
    """The next `room` jobs of a client waiting their turn in a lane, their hold cleared, in their order."""
    return await release_in_order(conn, next_turns(ref, room), TAKE_TURNS)
