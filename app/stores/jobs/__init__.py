"""The jobs aggregate's store: every status change of a job is one method here (its guard a step of
`app/stores/steps.py`), with its audit rows and the events that follow staged in the outbox in the same
transaction. Two implementations: `portable.PortableJobs` (SQLite, MSSQL by rendering) and `postgres.PgJobs`
(array statements, a hot batch one statement), chosen once by `app.stores.open_stores`."""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from sqlalchemy import ColumnElement
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.broker import Outgoing
from app.core.names import Names
from app.core.statuses import HeldReason, JobStatus
from app.models.rows import JobRow, TrailRow
from app.stores.flow import Admission
from app.stores.jobs.moves import Change
from app.stores.outbox import Pending

Moved = tuple[JobRow, Pending]  # a job as a move left it, and the event staged for it


class Admit(NamedTuple):
    """The admission of a claim's keyed jobs, in the claim's transaction, before it: the keyed among its jobs, and
    the flow store's admission for any of them (FlowStore.admit_in)."""

    keyed: list[str]
    admit_in: Callable[[AsyncConnection, list[str]], Awaitable[Admission]]


class Claim(NamedTuple):
    """What a claim batch did: the jobs it moved, each with its event, and what its admission did."""

    moved: list[Moved]
    admission: Admission = Admission()


class NewJobs(NamedTuple):
    """Jobs to save: their rows, their first audit rows, and their messages (`owners` marks job messages, whose
    publish queues their job; a scheduled job's is an event)."""

    jobs: Sequence[JobRow]
    trail: list[TrailRow]
    messages: list[Outgoing]
    owners: list[str | None]


class Edit(NamedTuple):
    """A dead job's new payload, given as it is replayed: stored as shown (`***` for credentials) with its
    credentials sealed, and its `edited` audit row's detail (who, and the payload before and after)."""

    payload: Any
    sealed: str | None
    detail: dict[str, Any]


class Finished(NamedTuple):
    """What a finish batch recorded: each outcome's event (None for one fenced out), and what followed the
    outcomes in their workflows (released jobs' messages, cancelled dependents' events, a workflow's end)."""

    recorded: list[Pending | None]
    follow: list[Pending]


class Renewed(NamedTuple):
    """What a lease renewal found: the runs still ours, and those of them whose cancel was asked for."""

    ours: set[str]
    cancelling: set[str]


@dataclass(frozen=True)
class Outcome:
    """What one run ended in, to record if our fencing token still holds."""

    job: JobRow  # as claimed
    to: JobStatus  # SUCCEEDED, RETRYING, DEAD_LETTERED or CANCELLED (its cancel asked for while it ran)
    values: dict[str, Any]
    detail: dict[str, Any]


class JobStore(Protocol):
    names: Names
    lease_seconds: float

    def transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection in a transaction of its own, committed as the block ends."""

    def one_transaction(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for work that is one statement on PostgreSQL and a transaction of several elsewhere."""

    async def read(self, conn: AsyncConnection, job_ids: list[str]) -> dict[str, JobRow]:
        """The jobs among `job_ids` as they stand, by id."""

    async def save(self, conn: AsyncConnection, new: NewJobs) -> list[Pending]:
        """New jobs, their first audit rows and their messages staged."""

    async def audit(self, conn: AsyncConnection, rows: list[TrailRow]) -> None:
        """Audit rows that are not a status change (job_id, event, detail, created_at), one statement."""

    async def queue_published(self, conn: AsyncConnection, job_ids: list[str], confirmed: list[int]) -> list[Pending]:
        """pending -> queued for jobs whose messages the broker confirmed, their outbox rows deleted."""

    async def claim(self, job_ids: list[str], admit: Admit | None = None) -> Claim:
        """pending -> queued -> running for those among `job_ids` within their budget, each step recorded; with
        `admit`, in its transaction after it, and not those it held back."""

    async def take_over(
        self, conn: AsyncConnection, changes: list[Change], where: tuple[ColumnElement[bool], ...]
    ) -> list[Moved]:
        """Jobs judged ours to run (a due retry, an expired lease) -> running."""

    async def bury(self, conn: AsyncConnection, changes: list[Change]) -> list[Moved]:
        """Jobs whose budget crashes used up -> dead_lettered."""

    async def stop(
        self, conn: AsyncConnection, changes: list[Change], where: tuple[ColumnElement[bool], ...]
    ) -> list[Moved]:
        """Running jobs whose cancel was asked for and whose run was lost -> cancelled."""

    async def finish(self, outcomes: list[Outcome]) -> Finished:
        """Every outcome whose fencing token still holds recorded, with what follows it in its workflow."""

    async def give_up(self, job_id: str, values: dict[str, Any], detail: dict[str, Any]) -> Moved | None:
        """A job whose message could not be processed -> dead_lettered, with its event; None if it left first."""

    async def give_up_bare(self, job_id: str, values: dict[str, Any]) -> None:
        """`give_up` by the job's status alone, with no event, for a job whose own values break the event."""

    async def renew(self, jobs: list[JobRow]) -> Renewed:
        """Leases of these runs extended: the ids still ours, and those of them whose cancel was asked for."""

    async def request_cancel(self, conn: AsyncConnection, jobs: list[JobRow]) -> list[JobRow]:
        """Ask the runs of running jobs (each as last read) to stop, without a status change: those still in that
        run, as they are now."""

    async def progress(self, reports: Mapping[str, tuple[int, dict[str, Any]]]) -> set[str]:
        """Running jobs' progress by id, each (its run's token, the report), written behind the token and the
        status `running`: the ids written."""

    async def queue_due(self, now: datetime, limit: int) -> tuple[list[JobRow], list[Pending]]:
        """Due scheduled jobs -> queued with their messages; the jobs and what to publish."""

    async def replay(
        self,
        conn: AsyncConnection,
        job: JobRow,
        detail: Mapping[str, Any] | None = None,
        edit: Edit | None = None,
    ) -> tuple[JobRow, list[Pending]] | None:
        """A dead-lettered job (as last read) -> queued, its budget reset: the job, its message and its event;
        `detail` joins its `replayed` audit row's; with `edit`, its payload replaced and the change in its audit
        trail."""

    async def replay_all(
        self,
        conn: AsyncConnection,
        jobs: list[JobRow],
        detail: Mapping[str, Any] | None = None,
        edit: Edit | None = None,
    ) -> tuple[list[JobRow], list[Pending]]:
        """`replay` for many jobs at once: those moved, and their messages and events; the caller rolls back when
        some did not move (their audit rows are written). An `edit` is of one job."""

    async def cancel(self, conn: AsyncConnection, job: JobRow) -> tuple[JobRow, list[Pending]] | None:
        """A job that has not started (as last read) -> cancelled; held or not, it is never released: the job,
        its event and what followed in its workflow."""

    async def cancel_all(self, conn: AsyncConnection, jobs: list[JobRow]) -> tuple[list[JobRow], list[Pending]]:
        """`cancel` for many jobs at once: those cancelled, and their events with what followed."""

    async def dependency_results(self, job_ids: list[str]) -> dict[str, Any]:
        """The results of these jobs (a job's dependencies), by their refs."""

    async def hold(self, job_ids: list[str], reason: HeldReason) -> set[str]:
        """The jobs among `job_ids` that wait to start held back in the database (rule 18) while `reason` stands
        (their type still paused; a type the calling worker has no handler for stands on its word), each newly
        held with its `held` audit row: the ids held now, by this call or before it. Not a status change."""

    async def release(
        self, job_types: list[str], limit: int, reason: HeldReason = HeldReason.PAUSED
    ) -> tuple[list[JobRow], list[Pending]]:
        """Up to `limit` jobs of `job_types` held for `reason` that has passed (their type is not paused; for
        `UNKNOWN_TYPE`, the caller is a job worker that has their type), released oldest first by one
        compare-and-set with their lane messages staged: the jobs, and the messages to publish."""
