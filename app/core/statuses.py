"""Job statuses and the transitions allowed between them: the one table code and docs share."""

from enum import StrEnum


class JobStatus(StrEnum):
    PENDING = "pending"
    WAITING = "waiting"  # a workflow's job whose dependencies have not all succeeded (or, on "continue", ended)
    SCHEDULED = "scheduled"  # saved with a run_at or delay_seconds: the scheduler queues it when it is due
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"


S = JobStatus

# Claimable statuses may go straight to DEAD_LETTERED when a claim would exceed the retry budget.
# RUNNING -> RUNNING is a claim of a job whose previous worker's lease expired.
# PENDING -> WAITING, like PENDING -> SCHEDULED, happens as a workflow's job is saved; WAITING leaves for PENDING
# when its dependencies allow (in the transaction that records the last of their outcomes), or for CANCELLED.
# PENDING -> SCHEDULED happens as the job is saved (both trail rows are written by the submit itself); SCHEDULED
# leaves only for QUEUED, when the scheduler finds it due, or for CANCELLED.
# RUNNING -> CANCELLED is recorded by the worker that runs the job, once it has stopped the handler of a job whose
# cancel was asked for, fenced like every outcome of a run (rule 3); never by the API itself.
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    S.PENDING: frozenset({S.SCHEDULED, S.WAITING, S.QUEUED, S.RUNNING, S.DEAD_LETTERED, S.CANCELLED}),
    S.WAITING: frozenset({S.PENDING, S.CANCELLED}),
    S.SCHEDULED: frozenset({S.QUEUED, S.CANCELLED}),
    S.QUEUED: frozenset({S.RUNNING, S.DEAD_LETTERED, S.CANCELLED}),
    S.RUNNING: frozenset({S.RUNNING, S.SUCCEEDED, S.RETRYING, S.DEAD_LETTERED, S.CANCELLED}),
    S.RETRYING: frozenset({S.QUEUED, S.RUNNING, S.DEAD_LETTERED, S.CANCELLED}),
    S.DEAD_LETTERED: frozenset({S.QUEUED}),
    S.SUCCEEDED: frozenset(),
    S.CANCELLED: frozenset(),
}

TERMINAL: frozenset[JobStatus] = frozenset({S.SUCCEEDED, S.DEAD_LETTERED, S.CANCELLED})
# The statuses a job may be held back in (DESIGN.md rule 18): waiting to start, its message in hand. A held job
# keeps its status; `jobs.held` says why it waits, and its release sends its message again.
HOLDABLE: tuple[JobStatus, ...] = (S.PENDING, S.QUEUED, S.RETRYING)


def can_move(source: JobStatus, target: JobStatus) -> bool:
    """Whether the transition table allows `source` -> `target`."""
    return target in TRANSITIONS[source]


def sources_of(target: JobStatus) -> list[JobStatus]:
    """Every status from which `target` may be reached, for compare-and-set WHERE clauses."""
    return [source for source, targets in TRANSITIONS.items() if target in targets]


class DeliveryStatus(StrEnum):
    """A webhook delivery's status."""

    PENDING = "pending"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class DeliveryOutcome(StrEnum):
    """What came of one delivery attempt, in its job's audit trail and in webhook_deliveries_total."""

    SUCCEEDED = "succeeded"
    RETRYING = "retrying"  # failed, and another attempt is due
    FAILED = "failed"  # failed for good


class DeadReason(StrEnum):
    """Why a job or a delivery was dead-lettered: the names stored in `dead_reason` and shown to clients."""

    RETRIES_EXHAUSTED = "retries_exhausted"
    PERMANENT_ERROR = "permanent_error"
    TIMEOUT = "timeout"
    WORKER_LOST = "worker_lost"
    GONE = "gone"  # a webhook endpoint answered 410
    UNPROCESSABLE = "unprocessable"  # the service itself failed to process its message three times


class TrailEvent(StrEnum):
    """Audit-trail entries that are not a status change (those are named after the new status)."""

    CREATED = "created"  # the job's first entry: saved, before any status change
    REPLAYED = "replayed"  # sent back to work from the DLQ
    EDITED = "edited"  # its payload changed in the DLQ as it was replayed (detail: by, admin, before, after)
    DELIVERY = "delivery"  # one webhook delivery's outcome
    HELD = "held"  # held back in the database (detail.reason), its message acked until its release
    THROTTLED = "throttled"  # first held back by its concurrency key or rate window (detail.key, detail.reason)


class HeldReason(StrEnum):
    """Why a job waits in the database rather than in a lane (`jobs.held`, the `held` audit row's reason)."""

    PAUSED = "paused"  # its job type is paused
    CONCURRENCY = "concurrency"  # its concurrency key's slots are all taken
    RATE = "rate"  # its rate key's window has no start left
    FAIR = "fair"  # its client has its share of the lane waiting already: it waits its turn
    UNKNOWN_TYPE = "unknown_type"  # a job worker that took it has no handler for its type (a plugin it lacks)


class OnFailure(StrEnum):
    """What a workflow does with the dependents of a job that ends dead-lettered or cancelled."""

    CANCEL_DEPENDENTS = "cancel_dependents"  # every job downstream of it is cancelled
    CONTINUE = "continue"  # a dependent runs once all of its dependencies have ended, however they ended


class WorkflowStatus(StrEnum):
    RUNNING = "running"  # some job is not yet terminal
    SUCCEEDED = "succeeded"  # every job succeeded
    FAILED = "failed"  # every job is terminal, and some job is dead-lettered
    CANCELLED = "cancelled"  # every job is terminal, none dead-lettered, some cancelled


class WorkerState(StrEnum):
    """A worker's state, as /ready and the workers API report it."""

    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    DISABLED = "disabled"
    FAILED = "failed"


class WorkerKind(StrEnum):
    """What a worker does: consume jobs, deliver webhooks, or run a loop on a cycle (relay, janitor, …)."""

    JOB = "job"
    WEBHOOK = "webhook"
    BACKGROUND = "background"


class Action(StrEnum):
    """What an operator asks of a worker, and the state kept for it."""

    STOP = "stop"
    START = "start"


class RedriveStatus(StrEnum):
    """A throttled redrive's status (services/redrives.py)."""

    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"  # every item it took reached: replayed, or skipped as no longer failed
    CANCELLED = "cancelled"


class RedriveKind(StrEnum):
    """What a redrive sends again: dead jobs, or failed webhook deliveries."""

    JOBS = "jobs"
    DELIVERIES = "deliveries"


# The operator's actions on a redrive, each allowed from these statuses (anything else is a 409); `finished` is
# the runner's, from running once its last item is reached.
REDRIVE_ACTIONS: dict[str, tuple[RedriveStatus, frozenset[RedriveStatus]]] = {
    "pause": (RedriveStatus.PAUSED, frozenset({RedriveStatus.RUNNING})),
    "resume": (RedriveStatus.RUNNING, frozenset({RedriveStatus.PAUSED})),
    "cancel": (RedriveStatus.CANCELLED, frozenset({RedriveStatus.RUNNING, RedriveStatus.PAUSED})),
}
