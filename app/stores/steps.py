"""A job's status changes, each a named step whose guard comes from the transition table (core/statuses.py): the
statuses it may move a job from are the table's sources of its target, or a subset of them named here. Every
statement that writes `jobs.status` is one of these steps (tests/stores/test_steps.py checks each against the
table), so adding a status or a move is an edit to the table and, for a new kind of change, one step here."""

from dataclasses import dataclass

from sqlalchemy import ColumnElement

from app.core.statuses import JobStatus, can_move, sources_of
from app.models.tables import JOBS

S = JobStatus


@dataclass(frozen=True)
class Step:
    """One kind of status change: from `sources` to `target`."""

    name: str
    target: JobStatus
    sources: tuple[JobStatus, ...]

    def __post_init__(self) -> None:
        refused = [s for s in self.sources if not can_move(s, self.target)]
        if refused or not self.sources:
            raise ValueError(f"step {self.name}: the transition table does not allow {refused} -> {self.target}")

    def guard(self) -> ColumnElement[bool]:
        """The step's WHERE guard for SQLAlchemy statements."""
        if len(self.sources) == 1:
            return JOBS.c.status == str(self.sources[0])
        return JOBS.c.status.in_([str(s) for s in self.sources])

    def sql_guard(self, table: str = "jobs") -> str:
        """The guard as SQL text, for the PostgreSQL statements. `status || ''`, which no index can serve, makes the
        planner read the jobs named by id by primary key (tests/stores/test_pg_plans.py)."""
        if len(self.sources) == 1:
            return f"{table}.status || '' = '{self.sources[0]}'"
        return f"{table}.status || '' IN ({', '.join(repr(str(s)) for s in self.sources)})"


def step(name: str, target: JobStatus, *only: JobStatus) -> Step:
    """A step to `target` from `only`, or from every status the table lets reach it."""
    return Step(name, target, tuple(only) if only else tuple(sources_of(target)))


SCHEDULE = step("schedule", S.SCHEDULED, S.PENDING)  # as the job is saved with a time to wait for
WAIT = step("wait", S.WAITING, S.PENDING)  # as a workflow's job with dependencies is saved
RELEASE = step("release", S.PENDING, S.WAITING)  # its dependencies allow it to run (stores/workflows/follow.py)
QUEUE = step("queue", S.QUEUED, S.PENDING)  # its message confirmed by the broker
QUEUE_DUE = step("queue_due", S.QUEUED, S.SCHEDULED)  # its time has come
CLAIM = step("claim", S.RUNNING, S.PENDING, S.QUEUED)  # a worker took its message
TAKE_OVER = step("take_over", S.RUNNING)  # a due retry, an expired lease: judged one by one (rule 4)
BURY = step("bury", S.DEAD_LETTERED)  # its budget spent by crashes, or its message unprocessable
SUCCEED = step("succeed", S.SUCCEEDED, S.RUNNING)
RETRY = step("retry", S.RETRYING, S.RUNNING)
FAIL = step("fail", S.DEAD_LETTERED, S.RUNNING)
REPLAY = step("replay", S.QUEUED, S.DEAD_LETTERED)
# Cancelled at once: every status but running that the table lets reach cancelled (a job that has not started).
CANCEL = step("cancel", S.CANCELLED, *(s for s in sources_of(S.CANCELLED) if s != S.RUNNING))
STOP = step("stop", S.CANCELLED, S.RUNNING)  # its cancel asked for while it ran: its worker stopped the handler

STEPS = (SCHEDULE, WAIT, RELEASE, QUEUE, QUEUE_DUE, CLAIM, TAKE_OVER, BURY, SUCCEED, RETRY, FAIL, REPLAY, CANCEL, STOP)
FINISHES = {S.SUCCEEDED: SUCCEED, S.RETRYING: RETRY, S.DEAD_LETTERED: FAIL, S.CANCELLED: STOP}
