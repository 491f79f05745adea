"""Workflows' store: a workflow and its edges saved with its jobs (`sql.py`), and what follows each of its jobs'
outcomes, written in the transaction that records the outcome (`follow.py`, DESIGN rule 19)."""

from enum import StrEnum


class OnFailure(StrEnum):
    """What a workflow does with the dependents of a job that ends dead-lettered or cancelled."""

    CANCEL_DEPENDENTS = "cancel_dependents"  # every job downstream of it is cancelled
    CONTINUE = "continue"  # a dependent runs once all of its dependencies have ended, however they ended


class WorkflowStatus(StrEnum):
    RUNNING = "running"  # some job is not yet terminal
    SUCCEEDED = "succeeded"  # every job succeeded
    FAILED = "failed"  # every job is terminal, and some job is dead-lettered
    CANCELLED = "cancelled"  # every job is terminal, none dead-lettered, some cancelled
