"""Every event type a webhook receiver can get, each with a line on when it is sent, the JSON Schema of its body
(made from the types the builders return, core/event_bodies.py) and an example body made by the very functions that
build the real events (core/messages.py), so neither can drift from what is sent."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.core.broker import Outgoing
from app.core.event_bodies import JobEventBody, TestEventBody, WorkflowEventBody, event_schema
from app.core.messages import dumps, job_event, loads, progress_event, webhook_test_event, workflow_event
from app.core.names import JOB_EVENTS, PROGRESS_EVENT, TEST_EVENT, WORKFLOW_EVENTS, Names
from app.core.statuses import JobStatus, WorkflowStatus
from app.schemas.job import JOB_OUT_EXAMPLE

AT = datetime(2026, 4, 5, 4, 13, 31, 210000, tzinfo=UTC)
SEQ: dict[str, int] = {JobStatus.SUCCEEDED: 4, JobStatus.RETRYING: 4, JobStatus.DEAD_LETTERED: 10}
ERROR = {"type": "TransientError", "message": "the upstream answered 503"}
# What each job status changes of the example job (JOB_OUT_EXAMPLE, a succeeded echo job).
JOB_CHANGES: dict[str, dict[str, Any]] = {
    JobStatus.SUCCEEDED: {},
    JobStatus.RETRYING: {"result": None, "error": ERROR, "finished_at": None},
    JobStatus.DEAD_LETTERED: {"result": None, "error": ERROR, "attempts": 4},
    JobStatus.CANCELLED: {"result": None, "started_at": None, "attempts": 0},
}
DESCRIPTIONS = {
    "job.succeeded": "A job finished with a result (data.job.result).",
    "job.retrying": "An attempt failed with a transient error; the job runs again after its backoff.",
    "job.dead_lettered": "A job failed for good (retries exhausted, a permanent error or a timeout): it is in the DLQ.",
    "job.cancelled": "A job was cancelled before it finished.",
    PROGRESS_EVENT: "A running job reported progress (data.job.progress), at most once a second.",
    "workflow.succeeded": "Every job of a workflow succeeded.",
    "workflow.failed": "Every job of a workflow has ended and one of them is dead-lettered.",
    "workflow.cancelled": "Every job of a workflow has ended, none dead-lettered, and one was cancelled.",
    TEST_EVENT: "Sent to one endpoint when its test is asked for (POST /api/v1/webhooks/{id}/test).",
}


@dataclass(frozen=True)
class EventKind:
    type: str
    description: str
    subscribable: bool  # an endpoint may name it in `events`
    default: bool  # an endpoint that names no events gets it
    example: dict[str, Any]
    schema: dict[str, Any]


def schema_of(kind: str) -> dict[str, Any]:
    """The JSON Schema of the body of the event type `kind` (one of the catalogue's)."""
    if kind == TEST_EVENT:
        return event_schema(TestEventBody, kind)
    if kind in WORKFLOW_EVENTS:
        return event_schema(WorkflowEventBody, kind, kind.removeprefix("workflow."))
    status = JobStatus.RUNNING if kind == PROGRESS_EVENT else kind.removeprefix("job.")
    return event_schema(JobEventBody, kind, status)


def catalogue(names: Names) -> list[EventKind]:
    """Every event type a receiver can get, in the order the docs list them."""
    examples: dict[str, Callable[[], dict[str, Any]]] = {
        **{kind: _job_example(names, kind.removeprefix("job.")) for kind in JOB_EVENTS},
        PROGRESS_EVENT: lambda: _body(progress_event(names, _example_job(JobStatus.RUNNING), AT)),
        **{kind: _workflow_example(names, kind.removeprefix("workflow.")) for kind in WORKFLOW_EVENTS},
        TEST_EVENT: lambda: dict(webhook_test_event("evt_test_5f0c8a7e", "6c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5", AT)),
    }
    return [
        EventKind(
            kind, DESCRIPTIONS[kind], kind != TEST_EVENT, kind in JOB_EVENTS, loads(dumps(example())), schema_of(kind)
        )
        for kind, example in examples.items()
    ]


def _example_job(status: str) -> dict[str, Any]:
    """The example job as it stands after a change to `status` (the fields an event's job has come from
    `public_job`, the same as a real event's)."""
    job = {**JOB_OUT_EXAMPLE, **JOB_CHANGES.get(status, {}), "status": status, "seq": SEQ.get(status, 3)}
    if status == JobStatus.RUNNING:
        job |= {
            "result": None,
            "finished_at": None,
            "progress": {"fraction": 0.4, "message": "page 2 of 5", "updated_at": AT},
        }
    return job


def _body(event: Outgoing) -> dict[str, Any]:
    body: dict[str, Any] = loads(event.body)
    return body


def _job_example(names: Names, status: str) -> Callable[[], dict[str, Any]]:
    return lambda: _body(job_event(names, _example_job(status), AT))


def _workflow_example(names: Names, status: str) -> Callable[[], dict[str, Any]]:
    counts = {"succeeded": 2, "dead_lettered": 1 if status == WorkflowStatus.FAILED else 0}
    counts["cancelled"] = 1 if status == WorkflowStatus.CANCELLED else 0
    workflow = {
        "id": "2b7e1516-28ae-4d2a-a6d2-abf7158809cf",
        "client_id": JOB_OUT_EXAMPLE["client_id"],
        "name": "nightly-export",
        "status": status,
        "on_failure": "cancel_dependents",
        "counts": counts,
        "created_at": JOB_OUT_EXAMPLE["created_at"],
        "finished_at": AT,
        "updated_at": AT,
        "seq": 1,
        "request_id": JOB_OUT_EXAMPLE["request_id"],
    }
    return lambda: _body(workflow_event(names, workflow))
