"""What a status change is made of, on any database: the job as last read and its new values (`Change`), the
compare-and-set UPDATE that makes it, and the audit row and event of each move made."""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import BindParameter, ColumnElement, Update, case, literal, update

from app.core.broker import Outgoing
from app.core.messages import job_event
from app.core.names import Names
from app.models.rows import JobRow, TrailRow, job_with
from app.models.setwise import per_row
from app.models.tables import JOBS
from app.stores.steps import Step


# A job's times never go backwards: each status change is stamped with now, or with the job's last change if that
# is later. Two processes' clocks are read before their statements wait for each other (a worker's claim takes
# its time, then waits for the row lock of the API's pending -> queued step, stamped later): the later commit takes
# the earlier stamp. `stamped` is the rule in Python, for a move from a row as read (its seq guards that it is still
# so); `stamp` in SQL, for a statement that moves rows it has not read; PostgreSQL's statements write it
# `greatest(...)`.
def stamped(job: JobRow, now: datetime) -> datetime:
    """When a move of `job` (as last read) made at `now` happened, for its row, audit row and event."""
    last: datetime = job["updated_at"]
    return last if last > now else now


def stamp(now: datetime | BindParameter[datetime]) -> ColumnElement[datetime]:
    """`stamped` in SQL: the moved row's new `updated_at`."""
    at = now if isinstance(now, BindParameter) else literal(now, JOBS.c.updated_at.type)
    return case((JOBS.c.updated_at > at, JOBS.c.updated_at), else_=at)


class Move(NamedTuple):
    """A status change made by a compare-and-set, not yet in the audit trail: from where, the job after it."""

    source: str
    after: JobRow
    detail: dict[str, Any]


@dataclass(frozen=True)
class Change:
    """One job's part of a move: the job as last read (with its seq), its new values, its audit detail."""

    job: JobRow
    values: dict[str, Any] = field(default_factory=dict)  # the columns it sets
    detail: dict[str, Any] = field(default_factory=dict)  # its audit row's detail


def planned(change: Change, to: str, now: datetime) -> Move:
    """The move `change` makes when its compare-and-set takes: the job as it is after it."""
    at = stamped(change.job, now)
    after = job_with(change.job, **change.values, status=str(to), seq=change.job["seq"] + 1, updated_at=at)
    return Move(change.job["status"], after, change.detail)


def compare_and_set(
    step: Step, changes: list[Change], now: datetime, where: tuple[ColumnElement[bool], ...] = ()
) -> Update:
    """One UPDATE for a step: each row to its own values, guarded by its own seq and the step's guard; RETURNING
    the ids it moved."""
    by_id = {c.job["id"]: c for c in changes}
    columns = {name for c in changes for name in c.values}
    assignments: dict[str, Any] = {
        name: per_row(JOBS.c.id, JOBS.c[name], {i: c.values.get(name, _column(c.job, name)) for i, c in by_id.items()})
        for name in columns
    }
    seqs = {i: c.job["seq"] for i, c in by_id.items()}
    return (
        update(JOBS)
        .where(JOBS.c.id.in_(list(by_id)), JOBS.c.seq == per_row(JOBS.c.id, JOBS.c.seq, seqs))
        .where(step.guard(), *where)
        .values(**assignments, status=str(step.target), seq=JOBS.c.seq + 1, updated_at=stamp(now))
        .returning(JOBS.c.id)
    )


def _column(job: JobRow, name: str) -> Any:
    return cast(dict[str, Any], job).get(name)


def trail_of(moves: list[Move]) -> list[TrailRow]:
    """The audit rows (job_id, event, detail, created_at) of moves, one each."""
    return [
        {
            "job_id": m.after["id"],
            "event": m.after["status"],
            "detail": {"from": m.source, "to": m.after["status"], "attempt": m.after["attempts"], **m.detail},
            "created_at": m.after["updated_at"],
        }
        for m in moves
    ]


def events_of(names: Names, moves: list[Move]) -> list[Outgoing]:
    """The events that follow moves, one each."""
    return [job_event(names, m.after, m.after["updated_at"]) for m in moves]
