"""The message contracts the API and the workers share: job messages and job events."""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast
from urllib.parse import urlsplit

import orjson

from app.core import tracing
from app.core.broker import DIRECT_REPLY_TO, Outgoing
from app.core.event_bodies import (
    JOB_FIELDS,
    WORKFLOW_FIELDS,
    EventJob,
    EventWorkflow,
    JobEventBody,
    TestEventBody,
    WorkflowEventBody,
)
from app.core.names import PROGRESS, TEST_EVENT, Names, broker_priority, event_type, lane_of

REQUEST_ID_HEADER = "x-request-id"
RETRY_COUNT_HEADER = "retry-count"  # ours: RabbitMQ >= 4 ignores publisher-set x-death
# On a delivery message an operator asked for (redeliver, recover, re-enable): sent at once, even through an open
# circuit; its attempt is the probe. Never carried into a delay tier.
OPERATOR_HEADER = "x-operator-action"
# On a delivery message: the key of the endpoint it goes to (see endpoint_key), so a worker can tell that the
# endpoint is slow and busy before it touches the database.
ENDPOINT_HEADER = "x-endpoint"
# On a delivery message back from a delay tier: how many times it has found its endpoint busy since its last
# attempt (see backoff.BUSY_STEPS). An attempt's retry starts again without it.
BUSY_HEADER = "x-endpoint-busy"
# On a message the service itself failed to process (not a handler's failure): how many times it has, so far. Such a
# message is published again with this one higher, and given up at the third failure (workers/unprocessable.py).
FAILURES_HEADER = "x-processing-failures"


def dumps(value: Any) -> bytes:
    """Compact JSON bytes; datetimes as ISO 8601. Raises TypeError for what JSON cannot hold."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except orjson.JSONEncodeError as exc:
        raise TypeError(str(exc)) from exc


def loads(data: bytes | str) -> Any:
    """The value of JSON text; raises ValueError when it is not JSON."""
    return orjson.loads(data)


GRANT_MARGIN_SECONDS = 5.0


@dataclass(frozen=True)
class JobMessage:
    """What a lane carries: the full job to run, so the worker needs no read to start."""

    job_id: str
    job_type: str
    client_id: str
    payload: Any
    priority: int
    max_retries: int
    timeout_seconds: float | None
    request_id: str | None
    keyed: bool = False  # it has a concurrency key or a rate key: admitted in its claim (workers/jobs/batches.py)
    fair: bool = False  # its client had jobs waiting their turn: its claim releases the next (services/fairness.py)
    # A release granted it its slot (and its window's start), counted as taken until then (Unix seconds): a claim
    # well before then needs no admission (`admitted`).
    granted_until: float | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], grant_seconds: float | None = None) -> "JobMessage":
        """The message of a job as `row` has it; `grant_seconds`: how long a fresh grant of it holds its slot (the
        flow store's lease), so the message carries the grant's end."""
        own = ("job_id", "keyed", "fair", "granted_until")
        fields = {name: row[name] for name in cls.__dataclass_fields__ if name not in own}
        keyed = row.get("concurrency_key") is not None or row.get("rate_key") is not None
        until = None
        granted = row.get("granted_at")
        if keyed and grant_seconds is not None and granted is not None and row.get("granted_run") == row["runs"] + 1:
            until = granted.timestamp() + grant_seconds
        return cls(job_id=row["id"], keyed=keyed, granted_until=until, **fields)

    @classmethod
    def from_bytes(cls, body: bytes) -> "JobMessage":
        data = loads(body)
        own = ("keyed", "fair", "granted_until")
        fields = {name: data.get(name) for name in cls.__dataclass_fields__ if name not in own}
        until = data.get("granted_until")
        until = float(until) if isinstance(until, int | float) and not isinstance(until, bool) else None
        return cls(keyed=data.get("keyed") is True, fair=data.get("fair") is True, granted_until=until, **fields)

    def admitted(self, now: float) -> bool:
        """Whether its claim may skip the admission: a release granted it a slot that holds for a while yet (a
        margin for the clocks of the worker and of the process that granted it)."""
        return self.granted_until is not None and now < self.granted_until - GRANT_MARGIN_SECONDS

    def to_bytes(self) -> bytes:
        return dumps(self.__dict__)


def job_outgoing(names: Names, message: JobMessage, retry_count: int = 0) -> Outgoing:
    """The message that puts a job in its lane."""
    headers: dict[str, Any] = {RETRY_COUNT_HEADER: retry_count}
    if message.request_id:
        headers[REQUEST_ID_HEADER] = message.request_id
    headers |= tracing.headers()  # the submit's trace context (tracing on): the worker's spans continue it
    return Outgoing(
        exchange=names.jobs_exchange,
        routing_key=names.lane_key(lane_of(message.priority)),
        body=message.to_bytes(),
        headers=headers,
        priority=broker_priority(message.priority),
        message_id=message.job_id,
    )


def expecting_reply(message: Outgoing, correlation_id: str) -> Outgoing:
    """A job message whose worker replies, once the job is finished, straight to the channel that published it."""
    return replace(message, reply_to=DIRECT_REPLY_TO, correlation_id=correlation_id)


@dataclass(frozen=True)
class JobReply:
    """What a worker tells a waiting submitter: the job reached this terminal status (the database says more)."""

    job_id: str
    status: str

    @classmethod
    def from_bytes(cls, body: bytes) -> "JobReply":
        data = loads(body)
        return cls(job_id=str(data["job_id"]), status=str(data["status"]))


def job_reply(reply_to: str, correlation_id: str | None, reply: JobReply) -> Outgoing:
    """The reply to a job message that asked for one, on the default exchange to the asker's reply address."""
    return Outgoing(
        exchange="",
        routing_key=reply_to,
        body=dumps(reply.__dict__),
        message_id=reply.job_id,
        mandatory=False,
        correlation_id=correlation_id,
    )


# Events of one routing key that go out together travel as one message (a bundle) of at most this many.
BUNDLE_MAX = 100


def bundle(events: list[Outgoing]) -> Outgoing:
    """Events of one routing key as one message: a JSON array of their bodies, in order. A subscriber gets the
    same events as from one message each (`events_of`), at the cost of one publish, confirm and delivery."""
    if len(events) == 1:
        return events[0]
    first = events[0]
    body = b"[" + b",".join(event.body for event in events) + b"]"
    traces = {e.message_id: e.headers[tracing.TRACEPARENT] for e in events if tracing.TRACEPARENT in e.headers}
    headers: dict[str, Any] = {tracing.BUNDLE_HEADER: traces} if traces else {}
    return Outgoing(
        first.exchange,
        first.routing_key,
        body,
        headers,
        message_id=f"{first.message_id}+{len(events) - 1}",
        mandatory=False,
    )


def events_of(body: bytes) -> list[bytes]:
    """The event bodies a message of the events exchange holds: its own, or each one of a bundle. Raises
    ValueError when a bundle is not JSON or not an array of objects."""
    if body[:1] != b"[":
        return [body]
    items = loads(body)
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ValueError("not a bundle of job events")
    return [dumps(item) for item in items]


def event_id(job_id: str, seq: int) -> str:
    """An event's id, derived from (job id, seq) so a re-published event keeps it (rule 10)."""
    return f"evt_{job_id.replace('-', '')}_{seq}"


def job_event(names: Names, job: Mapping[str, Any], created_at: datetime) -> Outgoing:
    """The event that follows a status change, on the events exchange as job.<type>.<status>."""
    return _event(names, job, event_id(job["id"], job["seq"]), job["status"], created_at)


def progress_event(names: Names, job: Mapping[str, Any], at: datetime) -> Outgoing:
    """A running job's `job.progress` event, its job showing the report. Not a status change: it carries the job's
    seq as it is, and its id adds the report's time in milliseconds, so each report is an event of its own."""
    report_id = f"{event_id(job['id'], job['seq'])}_p{round(at.timestamp() * 1000)}"
    return _event(names, job, report_id, PROGRESS, at)


def _event(names: Names, job: Mapping[str, Any], id_: str, kind: str, created_at: datetime) -> Outgoing:
    body: JobEventBody = {
        "id": id_,
        "type": event_type(kind),
        "created_at": created_at,
        "seq": job["seq"],
        "data": {"job": public_job(job)},
    }
    headers = {REQUEST_ID_HEADER: job["request_id"]} if job.get("request_id") else {}
    return Outgoing(
        exchange=names.events_exchange,
        routing_key=names.event_key(job["job_type"], kind),
        body=dumps(body),
        headers=headers,
        message_id=id_,
        mandatory=False,
    )


@dataclass(frozen=True, slots=True)
class JobEvent:
    """A job event as a subscriber reads it: its id, type and seq, the job as clients see it after the change, and
    when it was made (ISO 8601, as sent; None in an event that does not say)."""

    id: str
    type: str
    seq: int
    job: dict[str, Any]
    created_at: str | None = None
    trace: dict[str, str] | None = None  # the trace context its fan-out continues (tracing on)

    @classmethod
    def from_bytes(cls, body: bytes) -> "JobEvent":
        """The event a body of the events exchange holds (one of a bundle's: `events_of`); ValueError when it holds
        no job event."""
        event = loads(body)
        try:
            data = event["data"]
            job = data["job"] if "workflow" not in data else workflow_subject(data["workflow"])
            fields = (event["id"], event["type"], event["seq"])
        except (KeyError, TypeError):
            raise ValueError("not a job event") from None
        if not isinstance(job, dict):
            raise ValueError("not a job event: its job is not an object")
        return cls(*fields, job, event.get("created_at"))


def workflow_subject(workflow: Any) -> dict[str, Any]:
    """What a workflow's event is about, in the shape a job event's job has for those who route events (the
    webhook fan-out, the live streams): its client, no job id, no job type, no callback URL."""
    if not isinstance(workflow, dict):
        raise TypeError("not a workflow")
    return {"id": None, "client_id": workflow["client_id"], "job_type": None, "workflow_id": workflow["id"]}


def public_job(job: Mapping[str, Any]) -> EventJob:
    """A job as clients see it: the contract's fields, nothing internal."""
    return cast(EventJob, {name: job.get(name) for name in JOB_FIELDS})


def public_workflow(workflow: Mapping[str, Any]) -> EventWorkflow:
    """A workflow as its events carry it: the contract's fields and its jobs' counts by status, not its jobs."""
    return cast(EventWorkflow, {name: workflow.get(name) for name in WORKFLOW_FIELDS})


def workflow_event(names: Names, workflow: Mapping[str, Any]) -> Outgoing:
    """The event that ends a workflow (or any later change of its status), as workflow.<status>."""
    body: WorkflowEventBody = {
        "id": f"evt_wf_{workflow['id'].replace('-', '')}_{workflow['seq']}",
        "type": f"workflow.{workflow['status']}",
        "created_at": workflow["updated_at"],
        "seq": workflow["seq"],
        "data": {"workflow": public_workflow(workflow)},
    }
    headers = {REQUEST_ID_HEADER: workflow["request_id"]} if workflow.get("request_id") else {}
    return Outgoing(
        exchange=names.events_exchange,
        routing_key=names.workflow_event_key(workflow["status"]),
        body=dumps(body),
        headers=headers,
        message_id=body["id"],
        mandatory=False,
    )


def webhook_test_event(event_id: str, endpoint_id: str, created_at: datetime) -> TestEventBody:
    """The `webhook.test` event an endpoint's test sends: no job, the endpoint's id as its data."""
    return {"id": event_id, "type": TEST_EVENT, "created_at": created_at, "seq": 0, "data": {"webhook_id": endpoint_id}}


def endpoint_key(endpoint_id: str | None, url: str) -> str:
    """What a delivery's breaker and in-flight cap are kept by: its endpoint, or a callback URL's host."""
    return endpoint_id or f"callback:{urlsplit(url).netloc}"


def delivery_outgoing(
    names: Names, delivery_id: str, request_id: str | None, endpoint: str, operator: bool = False
) -> Outgoing:
    """The message that asks a webhook worker to attempt one delivery to `endpoint` (an `endpoint_key`);
    `operator`: at once, see OPERATOR_HEADER."""
    headers: dict[str, Any] = {REQUEST_ID_HEADER: request_id} if request_id else {}
    headers[ENDPOINT_HEADER] = endpoint
    if operator:
        headers[OPERATOR_HEADER] = "1"
    return Outgoing(
        exchange=names.webhooks_exchange,
        routing_key=names.webhook_deliver_key,
        body=dumps({"delivery_id": delivery_id}),
        headers=headers,
        message_id=delivery_id,
    )


def delivery_id(event_id: str, target: str) -> str:
    """A delivery's `webhook-id`, derived from (event, endpoint) so a twice-published event makes one."""
    digest = hashlib.sha256(f"{event_id}|{target}".encode()).hexdigest()[:32]
    return f"msg_{digest}"
