"""The bodies of the events a receiver gets (webhooks, the live streams), as types: the builders in core/messages.py
return them, their fields are the ones those builders copy (and the one statement that builds a job's event in SQL,
stores/jobs/postgres_sql.py), and the event catalogue's JSON Schemas are made from them (`event_schema`), so a
schema cannot name a field the events lack or miss one they carry. TypedDicts, not models: an event is built on
every status change, and a dict costs nothing more to build."""

from datetime import datetime
from typing import Any, Literal

from pydantic import TypeAdapter
from typing_extensions import TypedDict

from app.core.statuses import JobStatus, WorkflowStatus


class EventError(TypedDict):
    """Why an attempt failed, as the job's `error` shows it (a handler's error may add fields)."""

    type: str
    message: str


class EventProgress(TypedDict):
    """What a running job's handler last reported."""

    fraction: float
    message: str | None
    updated_at: datetime


class EventJob(TypedDict):
    """A job as clients see it, after the change the event tells of (the contract's fields, nothing internal)."""

    id: str
    client_id: str
    job_type: str
    status: JobStatus
    priority: int
    attempts: int
    max_retries: int
    payload: Any
    result: Any
    error: EventError | None
    idempotency_key: str | None
    callback_url: str | None
    request_id: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    run_at: datetime | None
    workflow_id: str | None
    ref: str | None
    depends_on: list[str] | None
    progress: EventProgress | None


class JobData(TypedDict):
    job: EventJob


class JobEventBody(TypedDict):
    """`job.<status>` (a status change) and `job.progress` (a report of a running job)."""

    id: str
    type: str
    created_at: datetime
    seq: int
    data: JobData


class EventWorkflow(TypedDict):
    """A workflow as its events carry it: its fields and its jobs' counts by status, not its jobs."""

    id: str
    client_id: str
    name: str | None
    status: WorkflowStatus
    on_failure: Literal["cancel_dependents", "continue"]
    counts: dict[str, int]
    created_at: datetime
    finished_at: datetime | None


class WorkflowData(TypedDict):
    workflow: EventWorkflow


class WorkflowEventBody(TypedDict):
    """`workflow.<status>`: a workflow's end (or a later change of its status)."""

    id: str
    type: str
    created_at: datetime
    seq: int
    data: WorkflowData


class TestData(TypedDict):
    webhook_id: str


class TestEventBody(TypedDict):
    """`webhook.test`: an endpoint's test."""

    id: str
    type: str
    created_at: datetime
    seq: int
    data: TestData


EventBody = JobEventBody | WorkflowEventBody | TestEventBody
JOB_FIELDS = tuple(EventJob.__annotations__)
WORKFLOW_FIELDS = tuple(EventWorkflow.__annotations__)
_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def event_schema(body: type, kind: str, status: str | None = None) -> dict[str, Any]:
    """The JSON Schema (2020-12) of one event type's body: `body`'s, its `type` the constant `kind`, and the
    status of its job or workflow `status` where the type names one. Self-contained (`$defs` inside)."""
    adapter = _ADAPTERS.setdefault(body, TypeAdapter(body))
    schema = adapter.json_schema(mode="serialization")
    schema["properties"]["type"] = {"const": kind, "title": "Type", "type": "string"}
    schema["title"] = kind
    if status is not None:  # a fresh schema each call: its subject's status made the constant
        subject, enum = ("EventWorkflow", "WorkflowStatus") if body is WorkflowEventBody else ("EventJob", "JobStatus")
        schema["$defs"][subject]["properties"]["status"] = {"const": status, "title": "Status", "type": "string"}
        schema["$defs"].pop(enum)
    return schema


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with its local references (`#/$defs/...`) replaced by what they name, and no `$defs`: a schema
    that stands anywhere, such as inside an OpenAPI document, whose own root such references would point at."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk(defs[ref.removeprefix("#/$defs/")])
            return {key: walk(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    result: dict[str, Any] = walk(schema)
    return result
