"""The jobs store on PostgreSQL: the portable store with its hot statements replaced by array statements, each
batch (a save, a confirmation, a claim, a finish) one statement sent alone, a transaction by itself."""

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.database import sqlstate
from app.core.messages import loads
from app.core.names import Names
from app.models.rows import TrailRow, job_row
from app.models.types import utcnow
from app.stores import postgres
from app.stores.flow import Admission, KeyRef
from app.stores.jobs import Admit, Claim, Finished, Moved, NewJobs, Outcome, postgres_admit, postgres_follow
from app.stores.jobs.moves import Change, Move, events_of, planned, trail_of
from app.stores.jobs.portable import PortableJobs
from app.stores.jobs.postgres_sql import (
    CLAIM_RECORDED,
    FINISH_RECORDED,
    INSERT_EVENTS,
    INSERT_EVENTS_AND_OUTBOX,
    JOB_COLUMNS,
    QUEUE_RECORDED,
    SAVE_JOBS,
    json_parsed,
)
from app.stores.outbox import Pending, rows_of, staged_event
from app.stores.outbox.postgres import PgOutbox, outbox_columns
from app.stores.postgres import PgConnections, to_json
from app.stores.workflows import follow
from app.stores.workflows.postgres import PgCounts


class PgJobs(PortableJobs):
    def __init__(
        self, engine: AsyncEngine, names: Names, outbox: PgOutbox, lease_seconds: float, connections: PgConnections
    ) -> None:
        super().__init__(engine, names, outbox, lease_seconds)
        self.connections = connections
        self.counts = PgCounts()
        # Whether a finish batch whose counts are all in its statement tries it alone first (FINISH_COUNTED): so
        # long as the last such batch had nothing to follow. A chain's every step releases the next, and then
        # its batches go straight to the transaction, rather than each failing first.
        self.counts_alone = True

    def one_transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for work that is one statement here: sent alone, with no BEGIN or COMMIT."""
        return self.connections.autocommit()

    async def save(self, conn: AsyncConnection, new: NewJobs) -> list[Pending]:
        """New jobs, their first audit rows and their messages staged, in one statement."""
        outbox = outbox_columns(rows_of(new.messages, utcnow(), new.owners))
        columns = (*outbox, *event_columns(new.trail), *_job_columns(new.jobs))
        ids = postgres.ids_in_order(await postgres.rows(conn, SAVE_JOBS, columns))
        return [Pending(i, m, j) for i, m, j in zip(ids, new.messages, new.owners, strict=True)]

    async def audit(self, conn: AsyncConnection, rows: list[TrailRow]) -> None:
        """Audit rows (job_id, event, detail, created_at), one statement."""
        await postgres.rows(conn, INSERT_EVENTS, event_columns(rows))

    async def record(self, conn: AsyncConnection, moves: list[Move]) -> list[Moved]:
        """The audit rows and staged events of moves already made, in one statement."""
        if not moves:
            return []
        events = events_of(self.names, moves)
        columns = (*outbox_columns(rows_of(events, utcnow())), *event_columns(trail_of(moves)))
        ids = postgres.ids_in_order(await postgres.rows(conn, INSERT_EVENTS_AND_OUTBOX, columns))
        return [(m.after, Pending(i, event)) for m, i, event in zip(moves, ids, events, strict=True)]

    async def queue_published(self, conn: AsyncConnection, job_ids: list[str], confirmed: list[int]) -> list[Pending]:
        """pending -> queued for the pending among `job_ids`, each with its audit row and its event staged, and the
        outbox rows `confirmed` deleted, as one statement."""
        exchange = self.names.events_exchange
        moved = await queue_recorded(conn, sorted(set(job_ids)), utcnow(), exchange, confirmed)
        return [staged_event(exchange, one.event) for one in moved]

    async def claim(self, job_ids: list[str], admit: Admit | None = None) -> Claim:
        """Rule 3's claim for a batch as one statement: the pending or queued among `job_ids` within their budget
        running, each step (pending -> queued, queued -> running) with its audit row and its event staged, in
        the order of the steps. With `admit`, the keyed jobs' admission in the same statement (postgres_admit.py);
        those it leaves undecided admitted and claimed after it, in a transaction: the admission, then the claim."""
        exchange = self.names.events_exchange
        now = utcnow()
        lease = now + timedelta(seconds=self.lease_seconds)
        if admit is None:
            async with self.connections.autocommit() as conn:
                moved = await claim_recorded(conn, sorted(set(job_ids)), now, lease, exchange)
            return Claim(self._moved(moved))
        since = now - timedelta(seconds=self.lease_seconds)
        params = postgres_admit.params(sorted(set(job_ids)), sorted(admit.keyed), now, lease, since, exchange)
        async with self.connections.autocommit() as conn:
            done = postgres_admit.parsed(await postgres.rows(conn, postgres_admit.ADMIT_AND_CLAIM, params))
        admission = Admission({h.job_id for h in done.held}, held_keys={KeyRef(h.client_id, h.key) for h in done.held})
        moved = _recorded(done.rows)
        if done.undecided:
            async with self.engine.begin() as conn:
                later = await admit.admit_in(conn, done.undecided)
                now = utcnow()
                lease = now + timedelta(seconds=self.lease_seconds)
                moved += await claim_recorded(conn, sorted(set(done.undecided) - later.held), now, lease, exchange)
            admission = admission.merged(later)
        return Claim(self._moved(moved), admission)

    async def _counted_alone(self, params: tuple[Any, ...]) -> list[Mapping[Any, Any]] | None:
        """A finish batch with its counts (FINISH_COUNTED) as one statement in autocommit: its rows, or None, with
        nothing written, when something follows the counts (a release, a workflow's end), which the caller's
        transaction then writes with them (rule 19)."""
        try:
            async with self.connections.autocommit() as conn:
                return list(await postgres.rows(conn, postgres_follow.FINISH_COUNTED, params))
        except DBAPIError as exc:
            if sqlstate(exc) != postgres_follow.NOTHING_FOLLOWS_OR_ELSE:
                raise
        self.counts_alone = False
        return None

    def _moved(self, moved: list["Recorded"]) -> list[Moved]:
        exchange = self.names.events_exchange
        return [(job_row(one.row), staged_event(exchange, one.event)) for one in moved]

    async def finish(self, outcomes: list[Outcome]) -> Finished:
        """The moves, their audit rows and their events planned here and written by one statement, a transaction
        by itself (rule 17's batch with no BEGIN or COMMIT round trip); None for an outcome fenced out. A batch
        with a workflow's job in it is a transaction, the same statement then what follows in the workflow, unless
        its counts are all in its statement and nothing follows them (`_counted_alone`)."""
        now = utcnow()
        moves = [planned(Change(o.job, o.values, o.detail), o.to, now) for o in outcomes]
        rows = [{**m.after, "seq": o.job["seq"], "runs": o.job["runs"]} for o, m in zip(outcomes, moves, strict=True)]
        events = events_of(self.names, moves)
        params = _finish_columns(now, rows, trail_of(moves), rows_of(events, now))
        followed: list[Pending] = []
        follows = follow.concerns(moves)
        counted = follows and postgres_follow.counted_here(moves)
        alone = await self._counted_alone(params) if counted and self.counts_alone else None
        result: Sequence[Mapping[Any, Any]]
        if alone is not None:
            result = alone
            moved = {(row["job_id"], row["runs"]) for row in result if row["job_id"] is not None}
        else:
            statement = postgres_follow.FINISH_FOLLOWED if counted else FINISH_RECORDED
            async with self.engine.begin() if follows else self.connections.autocommit() as conn:
                result = await postgres.rows(conn, statement, params)
                if counted:
                    ready, settle = ([r["job_id"] for r in result if r["follows"] == k] for k in ("release", "settle"))
                    result = [row for row in result if row["follows"] is None]
                    followed = await follow.after_counts(self, conn, ready, settle) if ready or settle else []
                    self.counts_alone = not (ready or settle)
                moved = {(row["job_id"], row["runs"]) for row in result if row["job_id"] is not None}
                if follows and not counted:
                    mine = [m for o, m in zip(outcomes, moves, strict=True) if (o.job["id"], o.job["runs"]) in moved]
                    followed = await self.settle(conn, mine)
        staged = {row["message_id"]: int(row["outbox_id"]) for row in result if row["job_id"] is None}
        recorded = [
            Pending(staged[event.message_id or ""], event) if (o.job["id"], o.job["runs"]) in moved else None
            for o, event in zip(outcomes, events, strict=True)
        ]
        return Finished(recorded, followed)


def event_columns(rows: Sequence[TrailRow]) -> tuple[list[Any], ...]:
    """Audit rows as INSERT_EVENTS's four arrays."""
    return (
        [r["job_id"] for r in rows],
        [str(r["event"]) for r in rows],
        [to_json(r["detail"]) for r in rows],
        [r["created_at"] for r in rows],
    )


def _job_columns(rows: Sequence[Any]) -> tuple[list[Any], ...]:
    return tuple(
        [to_json(r[name]) for r in rows] if kind == "json" else [r[name] for r in rows] for name, kind in JOB_COLUMNS
    )


def _finish_columns(
    now: datetime, rows: list[dict[str, Any]], trail: list[TrailRow], events: list[dict[str, Any]]
) -> tuple[Any, ...]:
    return (
        now,
        *([r[name] for r in rows] for name in ("id", "seq", "runs", "status")),
        [to_json(r["result"]) for r in rows],
        [to_json(r["error"]) for r in rows],
        *([r[name] for r in rows] for name in ("dead_reason", "finished_at", "next_attempt_at")),
        [str(t["event"]) for t in trail],
        [to_json(t["detail"]) for t in trail],
        *outbox_columns(events)[:6],  # exchange, routing key, body, headers, priority, message id
        # An SQL NULL (not JSON null) for a run that reported nothing: it keeps what the column holds.
        [None if r.get("progress") is None else to_json(r["progress"]) for r in rows],
        [r.get("failure_group") for r in rows],
    )


def _parsed(value: Any) -> dict[str, Any]:
    return loads(value) if isinstance(value, str) else dict(value or {})


@dataclass(frozen=True)
class Recorded:
    """A row a statement moved and recorded in SQL, from where, and the event staged for it: (outbox id, routing
    key, body, headers, message id)."""

    row: dict[str, Any]
    source: str
    event: tuple[int, str, bytes, dict[str, Any], str]


async def claim_recorded(
    conn: AsyncConnection, job_ids: list[str], now: datetime, lease: datetime, events_exchange: str
) -> list[Recorded]:
    """The step CLAIM for a batch, with its queued step for a pending job, as one statement (CLAIM_RECORDED)."""
    return _recorded(await postgres.rows(conn, CLAIM_RECORDED, (job_ids, lease, now, events_exchange)))


async def queue_recorded(
    conn: AsyncConnection, job_ids: list[str], now: datetime, events_exchange: str, confirmed: list[int]
) -> list[Recorded]:
    """The step QUEUE for a batch, the outbox rows `confirmed` deleted, as one statement (QUEUE_RECORDED)."""
    return _recorded(await postgres.rows(conn, QUEUE_RECORDED, (job_ids, now, events_exchange, confirmed)))


def _recorded(result: Sequence[Mapping[Any, Any]]) -> list[Recorded]:
    moved: list[Recorded] = []
    for record in result:
        row = dict(record)
        event = (
            int(row.pop("outbox_id")),
            row.pop("event_key"),
            bytes(row.pop("event_body")),
            _parsed(row.pop("event_headers")),
            row.pop("event_id"),
        )
        source = row.pop("source")
        moved.append(Recorded(json_parsed(row), source, event))
    return moved
