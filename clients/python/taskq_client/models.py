"""The API's models, generated from its OpenAPI document by generate.py."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal, cast

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, RootModel


class Action(Enum):
    """
    What an operator asks of a worker, and the state kept for it.
    """

    stop = "stop"
    start = "start"


class ApiKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    admin: Annotated[bool | None, Field(title="Admin")] = False
    client_id: Annotated[
        str,
        Field(
            description="The client the key acts for; `admin`, the admin's own client, only for an admin key.",
            max_length=64,
            min_length=1,
            pattern="^[A-Za-z0-9_.\\-]+$",
            title="Client Id",
        ),
    ]


class ApiKeyCreated(BaseModel):
    """
    The one answer that ever shows the key itself.
    """

    admin: Annotated[bool, Field(title="Admin")]
    api_key: Annotated[str, Field(title="Api Key")]
    client_id: Annotated[str, Field(title="Client Id")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    id: Annotated[str, Field(title="Id")]


class ApiKeyOut(BaseModel):
    admin: Annotated[bool, Field(title="Admin")]
    client_id: Annotated[str, Field(title="Client Id")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    id: Annotated[str, Field(title="Id")]
    prefix: Annotated[str, Field(title="Prefix")]
    revoked_at: Annotated[AwareDatetime | None, Field(title="Revoked At")]


class AttemptOut(BaseModel):
    attempt: Annotated[int, Field(title="Attempt")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    duration_ms: Annotated[float, Field(title="Duration Ms")]
    error: Annotated[str | None, Field(title="Error")]
    next_attempt_at: Annotated[AwareDatetime | None, Field(title="Next Attempt At")]
    response_body: Annotated[str | None, Field(title="Response Body")]
    status_code: Annotated[int | None, Field(title="Status Code")]


class BulkAction(Enum):
    cancel = "cancel"
    retry = "retry"


class JobId(RootModel[str]):
    root: Annotated[str, Field(max_length=64, min_length=1)]


class BulkIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Annotated[BulkAction, Field(description="`cancel` or `retry` (which replays a dead-lettered job).")]
    job_ids: Annotated[
        list[JobId],
        Field(
            description="1-500 job ids; a repeated id is acted on once.", max_length=500, min_length=1, title="Job Ids"
        ),
    ]


class BulkOutcome(Enum):
    cancelled = "cancelled"
    cancel_requested = "cancel_requested"
    replayed = "replayed"
    not_found = "not_found"
    conflict = "conflict"


class Item(RootModel[str]):
    root: Annotated[str, Field(max_length=2000)]


class BulletsBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: Annotated[list[Item], Field(max_length=200, min_length=1, title="Items")]
    type: Annotated[Literal["bullets"], Field(title="Type")]


class CircuitOut(BaseModel):
    calls: Annotated[int, Field(title="Calls")]
    failures: Annotated[int, Field(title="Failures")]
    job_type: Annotated[str, Field(title="Job Type")]
    retry_after: Annotated[float, Field(title="Retry After")]
    state: Annotated[str, Field(title="State")]


class Concurrency(BaseModel):
    """
    At most `limit` of the client's jobs with this key run at once, across every worker process.
    """

    model_config = ConfigDict(extra="forbid")
    key: Annotated[str, Field(description="Scoped to the client.", max_length=255, min_length=1, title="Key")]
    limit: Annotated[
        int, Field(description="1 runs the key's jobs one at a time, in order.", ge=1, le=1000, title="Limit")
    ]


class Author(RootModel[str]):
    root: Annotated[str, Field(max_length=200, title="Author")] = None


class PageSize(Enum):
    A4 = "A4"
    letter = "letter"


class DeadHour(BaseModel):
    at: Annotated[AwareDatetime, Field(description="The hour's start (UTC).", title="At")]
    dead_lettered: Annotated[
        int,
        Field(
            description="Jobs dead-lettered in the hour and dead still (a replay takes one out).", title="Dead Lettered"
        ),
    ]


class DeadReason(Enum):
    """
    Why a job or a delivery was dead-lettered: the names stored in `dead_reason` and shown to clients.
    """

    retries_exhausted = "retries_exhausted"
    permanent_error = "permanent_error"
    timeout = "timeout"
    worker_lost = "worker_lost"
    gone = "gone"
    unprocessable = "unprocessable"


class Status(Enum):
    pending = "pending"
    succeeded = "succeeded"
    failed = "failed"


class DeliveryOut(BaseModel):
    attempts: Annotated[list[AttemptOut], Field(title="Attempts")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    event_type: Annotated[str, Field(title="Event Type")]
    id: Annotated[str, Field(description="The `webhook-id` every attempt of this delivery carries.", title="Id")]
    job_id: Annotated[str | None, Field(title="Job Id")]
    status: Annotated[Status, Field(title="Status")]
    url: Annotated[str, Field(title="Url")]
    webhook_id: Annotated[
        str | None, Field(description="The endpoint; null for a job's own callback_url.", title="Webhook Id")
    ]


class DeliveryQueued(BaseModel):
    delivery_id: Annotated[str, Field(title="Delivery Id")]


class DlqStats(BaseModel):
    broker_depth: Annotated[
        int | None,
        Field(
            description="Messages in the broker's DLQ: only in an admin's answer, and only while the broker can tell.",
            title="Broker Depth",
        ),
    ] = None
    by_job_type: Annotated[dict[str, int], Field(title="By Job Type")]
    by_reason: Annotated[dict[str, int], Field(title="By Reason")]
    dead_lettered: Annotated[int, Field(title="Dead Lettered")]


class DlqTrend(BaseModel):
    an_hour_ago: Annotated[
        int, Field(description="The size less `last_hour`: the DLQ an hour ago, replays aside.", title="An Hour Ago")
    ]
    hourly: Annotated[
        list[DeadHour], Field(description="The current hour and the 23 before it, oldest first.", title="Hourly")
    ]
    last_hour: Annotated[int, Field(description="Of those, dead-lettered in the last 60 minutes.", title="Last Hour")]
    size: Annotated[int, Field(description="Dead-lettered jobs now.", title="Size")]


class CallbackUrl(RootModel[str]):
    root: Annotated[str, Field(max_length=2048, pattern="^https?://", title="Callback Url")] = None


class DelaySeconds(RootModel[float]):
    root: Annotated[
        float, Field(description="Run it this many seconds from now.", gt=0.0, le=31536000.0, title="Delay Seconds")
    ] = None


class IdempotencyKey(RootModel[str]):
    root: Annotated[str, Field(max_length=255, min_length=1, title="Idempotency Key")] = None


class TimeoutSeconds(RootModel[float]):
    root: Annotated[float, Field(gt=0.0, le=1500.0, title="Timeout Seconds")] = None


class ErrorOut(BaseModel):
    code: Annotated[str, Field(title="Code")]
    detail: Annotated[str, Field(title="Detail")]
    errors: Annotated[list[dict[str, Any]] | None, Field(title="Errors")] = None


class EventTypeOut(BaseModel):
    default: Annotated[bool, Field(description="An endpoint created without `events` gets it.", title="Default")]
    description: Annotated[str, Field(title="Description")]
    example: Annotated[
        dict[str, Any],
        Field(description="A body as a receiver gets it, made by the code that makes real ones.", title="Example"),
    ]
    schema_: Annotated[
        dict[str, Any],
        Field(
            alias="schema",
            description="The JSON Schema (2020-12) of its body, made from the types the code that builds it returns.",
            title="Schema",
        ),
    ]
    subscribable: Annotated[
        bool,
        Field(
            description="An endpoint may name it in `events` (`webhook.test` is sent, never named).",
            title="Subscribable",
        ),
    ]
    type: Annotated[str, Field(description="The event's `type`, as its body and `events` name it.", title="Type")]


class FailingEndpoint(BaseModel):
    active: Annotated[bool, Field(title="Active")]
    circuit: Annotated[
        str,
        Field(description="`open` (or half-open), `closed`, or `unknown` when Redis cannot be read.", title="Circuit"),
    ]
    failing_since: Annotated[
        AwareDatetime | None,
        Field(description="Since when every attempt has failed; null once one succeeds.", title="Failing Since"),
    ]
    failures: Annotated[int, Field(description="Failed attempts in the last 15 minutes.", title="Failures")]
    id: Annotated[str, Field(title="Id")]
    last_error: Annotated[str | None, Field(title="Last Error")]
    last_failed_at: Annotated[AwareDatetime | None, Field(title="Last Failed At")]
    url: Annotated[str, Field(title="Url")]


class FlakyPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fail_times: Annotated[
        int | None,
        Field(description="Fail while the job has run this many times or fewer.", ge=0, le=100, title="Fail Times"),
    ] = 1
    permanent: Annotated[
        bool | None, Field(description="Fail with a permanent error instead of a transient one.", title="Permanent")
    ] = False


class GroupExample(BaseModel):
    attempts: Annotated[int, Field(title="Attempts")]
    error: Annotated[dict[str, Any] | None, Field(description="Its last error, as the job shows it.", title="Error")]
    job_id: Annotated[str, Field(description="One of the group's jobs.", title="Job Id")]
    reason: DeadReason | None


class HourTotals(BaseModel):
    cancelled: Annotated[int, Field(title="Cancelled")]
    dead_lettered: Annotated[int, Field(title="Dead Lettered")]
    failure_rate: Annotated[float | None, Field(title="Failure Rate")]
    retrying: Annotated[int, Field(title="Retrying")]
    submitted: Annotated[int, Field(title="Submitted")]
    succeeded: Annotated[int, Field(title="Succeeded")]


class Format(Enum):
    """
    The output format; by default the source's.
    """

    JPEG = "JPEG"
    PNG = "PNG"
    WEBP = "WEBP"


class ImageUrl(RootModel[str]):
    root: Annotated[
        str, Field(description="An http(s) URL of the image.", max_length=2048, pattern="^https?://", title="Image Url")
    ] = None


class Operation(Enum):
    resize = "resize"
    thumbnail = "thumbnail"
    grayscale = "grayscale"
    rotate = "rotate"
    compress = "compress"
    convert = "convert"


class ImagePayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    angle: Annotated[
        int | None, Field(description="Degrees counter-clockwise, for `rotate`.", ge=-360, le=360, title="Angle")
    ] = 90
    format: Annotated[
        Format | None, Field(description="The output format; by default the source's.", title="Format")
    ] = None
    height: Annotated[int | None, Field(title="Height")] = None
    image_base64: Annotated[
        str | None, Field(description="The image file in base64, at most 20 MiB decoded.", title="Image Base64")
    ] = None
    image_url: Annotated[ImageUrl | None, Field(description="An http(s) URL of the image.", title="Image Url")] = None
    operations: Annotated[
        list[Operation], Field(description="Applied in this order.", max_length=10, min_length=1, title="Operations")
    ]
    quality: Annotated[int | None, Field(description="JPEG/WEBP quality; 75 with `compress`.", title="Quality")] = None
    width: Annotated[int | None, Field(title="Width")] = None


class Due(RootModel[str]):
    root: Annotated[str, Field(max_length=64, title="Due")] = "2026-02-14"


class Notes(RootModel[str]):
    root: Annotated[str, Field(max_length=2000, title="Notes")] = None


class InvoiceLine(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: Annotated[str, Field(max_length=500, min_length=1, title="Description")]
    quantity: Annotated[float, Field(gt=0.0, le=1000000.0, title="Quantity")]
    unit_price: Annotated[float, Field(ge=0.0, le=1000000000.0, title="Unit Price")]


class JobEventOut(BaseModel):
    """
    One row of the audit trail.
    """

    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    detail: Annotated[dict[str, Any], Field(title="Detail")]
    event: Annotated[str, Field(title="Event")]


class JobProgress(BaseModel):
    """
    What a running job's handler last reported (stored at most once a second, and its last report).
    """

    fraction: Annotated[float, Field(description="How far the run is, from 0 to 1.", ge=0.0, le=1.0, title="Fraction")]
    message: Annotated[str | None, Field(description="The handler's short word on it, if any.", title="Message")] = None
    updated_at: Annotated[AwareDatetime, Field(description="When the handler reported it.", title="Updated At")]


class JobStatus(Enum):
    pending = "pending"
    waiting = "waiting"
    scheduled = "scheduled"
    queued = "queued"
    running = "running"
    retrying = "retrying"
    succeeded = "succeeded"
    dead_lettered = "dead_lettered"
    cancelled = "cancelled"


class JobTypeOut(BaseModel):
    """
    One job type.
    """

    description: Annotated[str, Field(title="Description")]
    name: Annotated[str, Field(title="Name")]
    paused: Annotated[
        bool, Field(description="Paused: no new job of this type starts; its jobs wait, `queued`.", title="Paused")
    ]
    payload_schema: Annotated[
        dict[str, Any],
        Field(
            description="The JSON Schema of its payload (a plugin's type's too: docs/plugins.md).",
            title="Payload Schema",
        ),
    ]
    queued: Annotated[
        int,
        Field(
            description="Your jobs of this type waiting to start (`pending` or `queued`); an admin's: all.",
            title="Queued",
        ),
    ]
    running: Annotated[int, Field(description="Your jobs of this type running now; an admin's: all.", title="Running")]


class JobTypesOut(BaseModel):
    items: Annotated[list[JobTypeOut], Field(title="Items")]


class KeyStateOut(BaseModel):
    """
    One client's concurrency key: its limit (the job's), its jobs running (or granted a slot) and waiting.
    """

    key: Annotated[str, Field(title="Key")]
    limit: Annotated[int, Field(title="Limit")]
    running: Annotated[int, Field(title="Running")]
    waiting: Annotated[int, Field(title="Waiting")]


class LastError(BaseModel):
    at: Annotated[AwareDatetime, Field(title="At")]
    error: Annotated[str | None, Field(title="Error")]
    status_code: Annotated[
        int | None,
        Field(description="Null when no answer came (a timeout, a refused connection).", title="Status Code"),
    ]


class Latency(BaseModel):
    p50: Annotated[float | None, Field(description="Milliseconds; null with no attempt in the window.", title="P50")]
    p95: Annotated[float | None, Field(title="P95")]


class Paragraph(RootModel[str]):
    root: Annotated[str, Field(max_length=10000)]


class Subject(RootModel[str]):
    root: Annotated[str, Field(max_length=200, title="Subject")] = None


class LetterData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    closing: Annotated[str | None, Field(max_length=200, title="Closing")] = "Yours sincerely,"
    date: Annotated[str | None, Field(max_length=64, title="Date")] = "15 January 2026"
    paragraphs: Annotated[list[Paragraph], Field(max_length=200, min_length=1, title="Paragraphs")]
    recipient: Annotated[str | None, Field(max_length=500, title="Recipient")] = (
        "Ms Jane Doe\nAcme Corporation\n42 Harbour Road\nShelbyville"
    )
    salutation: Annotated[str | None, Field(max_length=200, title="Salutation")] = "Dear Ms Doe,"
    sender: Annotated[str | None, Field(max_length=500, title="Sender")] = (
        "Example Supplies Ltd\n1 Market Street\nSpringfield"
    )
    signature: Annotated[str | None, Field(max_length=200, title="Signature")] = "John Smith"
    subject: Annotated[Subject | None, Field(title="Subject")] = None


class LetterDocument(BaseModel):
    """
    A letter: sender, date, recipient and subject, its paragraphs over the pages, the signature last.
    """

    model_config = ConfigDict(extra="forbid")
    author: Annotated[Author | None, Field(title="Author")] = None
    data: Annotated[LetterData | None, Field(description="The letter; sample data when absent.")] = None
    page_size: Annotated[PageSize | None, Field(title="Page Size")] = PageSize.A4
    pages: Annotated[
        int | None,
        Field(description="Pages the document has; more only when `data` does not fit.", ge=1, le=50, title="Pages"),
    ] = 1
    template: Annotated[Literal["letter"], Field(title="Template")]


class LogLevel(Enum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


class LogRecordOut(BaseModel):
    level: Annotated[str, Field(title="Level")]
    logger: Annotated[str, Field(title="Logger")]
    message: Annotated[str, Field(title="Message")]
    process: Annotated[str, Field(title="Process")]
    request_id: Annotated[str | None, Field(title="Request Id")]
    time: Annotated[str, Field(title="Time")]


class Minute(BaseModel):
    at: Annotated[AwareDatetime, Field(description="The minute's start (UTC).", title="At")]
    cancelled: Annotated[int, Field(description="Jobs cancelled in the minute.", title="Cancelled")]
    dead_lettered: Annotated[
        int, Field(description="Jobs dead-lettered in the minute and dead still.", title="Dead Lettered")
    ]
    failure_rate: Annotated[
        float | None,
        Field(
            description="(retrying + dead_lettered) / (retrying + dead_lettered + succeeded); null when none ended.",
            title="Failure Rate",
        ),
    ]
    retrying: Annotated[
        int, Field(description="Failed attempts that will be retried, recorded in the minute.", title="Retrying")
    ]
    submitted: Annotated[int, Field(description="Jobs created in the minute.", title="Submitted")]
    succeeded: Annotated[int, Field(description="Jobs that succeeded in the minute.", title="Succeeded")]


class Method(Enum):
    POST = "POST"
    PUT = "PUT"
    PATCH = "PATCH"
    GET = "GET"
    DELETE = "DELETE"


class Secret(RootModel[str]):
    root: Annotated[
        str,
        Field(
            description="Signs the call like a webhook delivery (`whsec_…` or any string); sealed at rest, shown as `***`.",
            max_length=200,
            title="Secret",
        ),
    ] = None


class NotificationPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: Annotated[Any | None, Field(description="Sent as compact JSON; nothing is sent when null.")] = None
    headers: Annotated[
        dict[str, str] | None,
        Field(
            description="Sent with the call; the values of `Authorization`, `Proxy-Authorization`, `Cookie` and `X-Api-Key` are sealed at rest and shown as `***`.",
            max_length=50,
            title="Headers",
        ),
    ] = None
    include_dependencies: Annotated[
        bool | None,
        Field(
            description="In a workflow: add `dependencies` to the body object, the results of the jobs this one depends on, by their refs (a render's `artifact_url`, say). The body must then be an object, or null for one holding `dependencies` alone.",
            title="Include Dependencies",
        ),
    ] = False
    method: Annotated[Method | None, Field(title="Method")] = Method.POST
    secret: Annotated[
        Secret | None,
        Field(
            description="Signs the call like a webhook delivery (`whsec_…` or any string); sealed at rest, shown as `***`.",
            title="Secret",
        ),
    ] = None
    timeout: Annotated[
        float | None, Field(description="Seconds to wait for the answer.", gt=0.0, le=60.0, title="Timeout")
    ] = 10
    url: Annotated[
        str,
        Field(
            description="An http(s) URL to call; the values of its credential-like query parameters (`access_token`, `key`, `signature`...) are sealed at rest and shown as `***`.",
            max_length=2048,
            pattern="^https?://",
            title="Url",
        ),
    ]


class OnFailure(Enum):
    """
    What a workflow does with the dependents of a job that ends dead-lettered or cancelled.
    """

    cancel_dependents = "cancel_dependents"
    continue_ = "continue"


class QueueOut(BaseModel):
    change_per_second: Annotated[
        float | None,
        Field(
            description="How fast `ready` changed between this API process's previous read (up to a minute ago, at least a second) and this one: arrivals less departures per second; null on the first read.",
            title="Change Per Second",
        ),
    ]
    consumers: Annotated[int, Field(title="Consumers")]
    deliver_per_second: Annotated[
        float | None,
        Field(
            description="From the management API when RABBITMQ_MANAGEMENT_URL is set; else null.",
            title="Deliver Per Second",
        ),
    ]
    feeds: Annotated[
        str | None,
        Field(description="For a retry tier, the lane it returns to (`jobs.default`), or `webhooks`.", title="Feeds"),
    ]
    kind: Annotated[
        str, Field(description="`queue` (a lane or a worker's queue), `retry` (a delay tier) or `dlq`.", title="Kind")
    ]
    publish_per_second: Annotated[
        float | None,
        Field(
            description="From the management API when RABBITMQ_MANAGEMENT_URL is set; else null.",
            title="Publish Per Second",
        ),
    ]
    queue: Annotated[str, Field(title="Queue")]
    ready: Annotated[int, Field(title="Ready")]
    tier: Annotated[
        str | None, Field(description="For a retry tier, its delay, as in its name (`240ms`).", title="Tier")
    ]
    topology: Annotated[str, Field(description="The first part of its name: `jobs`, `webhooks`.", title="Topology")]


class QueuesOut(BaseModel):
    in_retry: Annotated[
        dict[str, int],
        Field(description="Messages waiting in retry tiers, per topology (`jobs`, `webhooks`).", title="In Retry"),
    ]
    items: Annotated[list[QueueOut], Field(title="Items")]
    rates_from: Annotated[
        str,
        Field(
            description="`depths` (changes between reads) or `management` (the management API too).", title="Rates From"
        ),
    ]
    sampled_over_seconds: Annotated[
        float | None, Field(description="The span the `change_per_second` figures cover.", title="Sampled Over Seconds")
    ]


class RateLimit(BaseModel):
    """
    At most `limit` of the client's jobs with this key start in any window of `period_seconds`.
    """

    model_config = ConfigDict(extra="forbid")
    key: Annotated[str, Field(description="Scoped to the client.", max_length=255, min_length=1, title="Key")]
    limit: Annotated[int, Field(ge=1, le=1000000, title="Limit")]
    period_seconds: Annotated[float, Field(description="The window.", ge=0.1, le=86400.0, title="Period Seconds")]


class ReadyOut(BaseModel):
    components: Annotated[dict[str, str], Field(title="Components")]
    status: Annotated[str, Field(title="Status")]


class RecoverIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    since: Annotated[AwareDatetime, Field(title="Since")]


class RecoverOut(BaseModel):
    delivery_ids: Annotated[list[str], Field(title="Delivery Ids")]
    recovered: Annotated[int, Field(title="Recovered")]


class RedriveChange(BaseModel):
    at: Annotated[AwareDatetime, Field(title="At")]
    by: Annotated[
        str | None,
        Field(description="The client id of the key that did it; null for the runner (finished).", title="By"),
    ]
    event: Annotated[
        str, Field(description="created, paused, resumed, rate_changed, cancelled or finished.", title="Event")
    ]


class EventType(RootModel[str]):
    root: Annotated[str, Field(description="Deliveries: of this event type.", max_length=64, title="Event Type")]


class Group(RootModel[str]):
    root: Annotated[str, Field(description="Jobs: a failure group's id (/dlq/groups).", max_length=16, title="Group")]


class JobIds(RootModel[list[str]]):
    root: Annotated[list[str], Field(description="Jobs: these ids.", max_length=1000, min_length=1, title="Job Ids")]


class JobType(RootModel[str]):
    root: Annotated[str, Field(description="Jobs: of this type.", max_length=64, title="Job Type")]


class WebhookId(RootModel[str]):
    root: Annotated[str, Field(description="Deliveries: to this endpoint.", max_length=36, title="Webhook Id")]


class RedriveKind(Enum):
    """
    What a redrive sends again: dead jobs, or failed webhook deliveries.
    """

    jobs = "jobs"
    deliveries = "deliveries"


class RedrivePace(BaseModel):
    """
    A new pace for a running or paused redrive.
    """

    model_config = ConfigDict(extra="forbid")
    per_second: Annotated[
        float,
        Field(
            description="The pace: at most this many a second (fractions allowed: 0.5 is one every two seconds).",
            gt=0.0,
            le=1000.0,
            title="Per Second",
        ),
    ]


class RedriveStatus(Enum):
    """
    A throttled redrive's status (services/redrives.py).
    """

    running = "running"
    paused = "paused"
    finished = "finished"
    cancelled = "cancelled"


class Group1(RootModel[str]):
    root: Annotated[
        str,
        Field(
            description="A failure group's id (`GET /api/v1/dlq/groups`): its jobs only.",
            pattern="^[0-9a-f]{16}$",
            title="Group",
        ),
    ]


class JobIds1(RootModel[list[str]]):
    root: Annotated[list[str], Field(max_length=1000, title="Job Ids")]


class ReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    group: Annotated[
        Group1 | None,
        Field(description="A failure group's id (`GET /api/v1/dlq/groups`): its jobs only.", title="Group"),
    ] = None
    job_ids: Annotated[JobIds1 | None, Field(title="Job Ids")] = None
    job_type: Annotated[str | None, Field(title="Job Type")] = None
    limit: Annotated[int | None, Field(ge=1, le=1000, title="Limit")] = 100


class ReplayOneIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    payload: Annotated[
        dict[str, Any] | None,
        Field(
            description="The job's new payload, checked by its job type's model as a submit is; a value left as the job shows it (`***` where a credential stood) keeps what it stood for. Absent: replayed as it is.",
            title="Payload",
        ),
    ] = None


class ReplayOut(BaseModel):
    job_ids: Annotated[list[str], Field(title="Job Ids")]
    replayed: Annotated[int, Field(title="Replayed")]


class Summary(RootModel[str]):
    root: Annotated[str, Field(max_length=10000, title="Summary")] = None


class Bullet(RootModel[str]):
    root: Annotated[str, Field(max_length=2000)]


class ReportSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bullets: Annotated[list[Bullet] | None, Field(max_length=200, title="Bullets")] = None
    heading: Annotated[str, Field(max_length=200, min_length=1, title="Heading")]
    paragraphs: Annotated[list[Paragraph] | None, Field(max_length=50, title="Paragraphs")] = None


class ScheduleOut(BaseModel):
    """
    A schedule; `next_run_at` is null while it is paused (`active: false`).
    """

    active: Annotated[bool, Field(title="Active")]
    client_id: Annotated[str, Field(title="Client Id")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    cron: Annotated[str, Field(title="Cron")]
    id: Annotated[str, Field(title="Id")]
    job: Annotated[dict[str, Any], Field(title="Job")]
    last_run_at: Annotated[AwareDatetime | None, Field(title="Last Run At")]
    name: Annotated[str, Field(title="Name")]
    next_run_at: Annotated[AwareDatetime | None, Field(title="Next Run At")]
    timezone: Annotated[str, Field(title="Timezone")]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]


class SchedulePage(BaseModel):
    items: Annotated[list[ScheduleOut], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(title="Next Cursor")]


class SecretOut(BaseModel):
    secret: Annotated[str, Field(title="Secret")]


class SleepPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")
    progress: Annotated[
        bool | None, Field(description="Report progress (elapsed / seconds) about every 0.5 s.", title="Progress")
    ] = False
    seconds: Annotated[float, Field(description="How long to sleep, at most 600 s.", ge=0.0, le=600.0, title="Seconds")]


class Submitted(Enum):
    """
    How far a submitted job got.
    """

    created = "created"
    pending = "pending"
    existing = "existing"


class RowItem(RootModel[str]):
    root: Annotated[str, Field(max_length=2000)]


class Row(RootModel[list[RowItem]]):
    root: Annotated[list[RowItem], Field(max_length=12, min_length=1)]


class TableBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: Annotated[
        list[Row],
        Field(
            description="The first row is the header; every row has the same length.",
            max_length=500,
            min_length=1,
            title="Rows",
        ),
    ]
    type: Annotated[Literal["table"], Field(title="Type")]


class Type(Enum):
    heading = "heading"
    paragraph = "paragraph"


class TextBlock(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Annotated[str, Field(max_length=10000, title="Text")]
    type: Annotated[Literal["heading", "paragraph"], Field(title="Type")]


class Throughput(BaseModel):
    bucket_seconds: Annotated[int, Field(description="The width of a bucket: 60.", title="Bucket Seconds")]
    last_hour: Annotated[HourTotals, Field(description="The minutes added up.")]
    minutes: Annotated[
        list[Minute], Field(description="The current minute and the 59 before it, oldest first.", title="Minutes")
    ]


class Timing(BaseModel):
    job_type: Annotated[str, Field(title="Job Type")]
    run_p50: Annotated[
        float | None,
        Field(description="Seconds from start to finish of the last run; null with no sample.", title="Run P50"),
    ]
    run_p95: Annotated[float | None, Field(title="Run P95")]
    sample: Annotated[
        int,
        Field(description="How many runs the percentiles come from: the type's latest, at most 500.", title="Sample"),
    ]
    wait_p50: Annotated[
        float | None, Field(description="Seconds from due (created or run_at, the later) to started.", title="Wait P50")
    ]
    wait_p95: Annotated[float | None, Field(title="Wait P95")]


class TypeCounts(BaseModel):
    counts: Annotated[
        dict[str, int],
        Field(description="Jobs of this type by status; a status with none is left out.", title="Counts"),
    ]
    job_type: Annotated[str, Field(title="Job Type")]


class Unique(BaseModel):
    """
    One job of the client's with this key at a time: a duplicate submit answers with that job.
    """

    model_config = ConfigDict(extra="forbid")
    for_seconds: Annotated[
        int | None,
        Field(
            description="Also hold the key this long after the job was created, finished or not; by default only while it is not terminal.",
            title="For Seconds",
        ),
    ] = None
    key: Annotated[str, Field(description="Scoped to the client.", max_length=255, min_length=1, title="Key")]


class Description(RootModel[str]):
    root: Annotated[str, Field(max_length=500, title="Description")]


class Event(Enum):
    job_succeeded = "job.succeeded"
    job_dead_lettered = "job.dead_lettered"
    job_retrying = "job.retrying"
    job_cancelled = "job.cancelled"
    job_progress = "job.progress"
    workflow_succeeded = "workflow.succeeded"
    workflow_failed = "workflow.failed"
    workflow_cancelled = "workflow.cancelled"


class JobId1(RootModel[str]):
    root: Annotated[str, Field(description="Only events of this job.", max_length=36, title="Job Id")]


class WebhookCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: Annotated[Description | None, Field(title="Description")] = None
    events: Annotated[list[Event] | None, Field(min_length=1, title="Events")] = None
    job_id: Annotated[JobId1 | None, Field(description="Only events of this job.", title="Job Id")] = None
    job_type: Annotated[str | None, Field(description="Only events of jobs of this type.", title="Job Type")] = None
    url: Annotated[
        str,
        Field(
            description="An http(s) URL that resolves to a public address.",
            max_length=2048,
            pattern="^https?://",
            title="Url",
        ),
    ]


class WebhookCreated(BaseModel):
    active: Annotated[bool, Field(title="Active")]
    client_id: Annotated[str, Field(title="Client Id")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    description: Annotated[str | None, Field(title="Description")]
    disabled_reason: Annotated[str | None, Field(title="Disabled Reason")]
    events: Annotated[list[str], Field(title="Events")]
    id: Annotated[str, Field(title="Id")]
    job_id: Annotated[str | None, Field(title="Job Id")]
    job_type: Annotated[str | None, Field(title="Job Type")]
    secret: Annotated[str, Field(description="`whsec_…`: shown this once; verify deliveries with it.", title="Secret")]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]
    url: Annotated[str, Field(title="Url")]


class WebhookOut(BaseModel):
    """
    An endpoint; its secret is never shown again after creation.
    """

    active: Annotated[bool, Field(title="Active")]
    client_id: Annotated[str, Field(title="Client Id")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    description: Annotated[str | None, Field(title="Description")]
    disabled_reason: Annotated[str | None, Field(title="Disabled Reason")]
    events: Annotated[list[str], Field(title="Events")]
    id: Annotated[str, Field(title="Id")]
    job_id: Annotated[str | None, Field(title="Job Id")]
    job_type: Annotated[str | None, Field(title="Job Type")]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]
    url: Annotated[str, Field(title="Url")]


class Circuit(Enum):
    """
    The endpoint's circuit breaker now.
    """

    closed = "closed"
    open = "open"
    half_open = "half_open"


class Window(Enum):
    field_1h = "1h"
    field_24h = "24h"


class WebhookStatsOut(BaseModel):
    """
    An endpoint's deliveries made in the window, and their attempts; its circuit and in-flight count now.
    """

    attempts: Annotated[int, Field(description="The attempts of those deliveries.", title="Attempts")]
    circuit: Annotated[Circuit, Field(description="The endpoint's circuit breaker now.", title="Circuit")]
    deliveries: Annotated[
        int, Field(description="Deliveries made in the window, whatever their status now.", title="Deliveries")
    ]
    failed: Annotated[int, Field(title="Failed")]
    in_flight: Annotated[
        int,
        Field(
            description="Its deliveries pending now, whenever made: waiting for an attempt or sending.",
            title="In Flight",
        ),
    ]
    last_error: Annotated[LastError | None, Field(description="The latest of those attempts that failed.")]
    latency_ms: Annotated[Latency, Field(description="Those attempts' durations, nearest-rank percentiles.")]
    pending: Annotated[int, Field(title="Pending")]
    succeeded: Annotated[int, Field(title="Succeeded")]
    success_rate: Annotated[
        float | None,
        Field(
            description="The share of those attempts answered 2xx (of attempts, not deliveries), 0 to 1; null with none.",
            title="Success Rate",
        ),
    ]
    window: Annotated[Window, Field(title="Window")]


class WebhookUpdate(BaseModel):
    """
    The fields to change; a field left out keeps its value. Only `description` may be set to null.
    """

    model_config = ConfigDict(extra="forbid")
    active: Annotated[bool | None, Field(title="Active")] = None
    description: Annotated[Description | None, Field(title="Description")] = None
    events: Annotated[list[Event] | None, Field(min_length=1, title="Events")] = None
    url: Annotated[
        str | None,
        Field(
            description="An http(s) URL that resolves to a public address.",
            max_length=2048,
            pattern="^https?://",
            title="Url",
        ),
    ] = None


class WhoAmIOut(BaseModel):
    admin: Annotated[bool, Field(title="Admin")]
    client_id: Annotated[str, Field(title="Client Id")]


class WorkerOut(BaseModel):
    circuit_breaker_state: Annotated[str, Field(title="Circuit Breaker State")]
    consumers: Annotated[int, Field(title="Consumers")]
    error_rate: Annotated[float, Field(title="Error Rate")]
    failed: Annotated[int, Field(title="Failed")]
    in_flight: Annotated[int, Field(title="In Flight")]
    kind: Annotated[str, Field(title="Kind")]
    last_cycle_duration_ms: Annotated[float | None, Field(title="Last Cycle Duration Ms")]
    last_heartbeat: Annotated[str, Field(title="Last Heartbeat")]
    name: Annotated[str, Field(title="Name")]
    next_delay_seconds: Annotated[float | None, Field(title="Next Delay Seconds")] = None
    process: Annotated[str, Field(title="Process")]
    processed: Annotated[int, Field(title="Processed")]
    processing_rate: Annotated[float, Field(title="Processing Rate")]
    state: Annotated[str, Field(title="State")]


class WorkersOut(BaseModel):
    items: Annotated[list[WorkerOut], Field(title="Items")]


class WorkflowStatus(Enum):
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


class AcceptedOut(BaseModel):
    action: Action
    name: Annotated[str, Field(title="Name")]


class BulkItemOut(BaseModel):
    job_id: Annotated[str, Field(title="Job Id")]
    outcome: BulkOutcome
    status: Annotated[
        JobStatus | None, Field(description="The job's status after the action; null when the job was not found.")
    ] = None


class BulkOut(BaseModel):
    """
    Each distinct id, in the order first given, with what became of it.
    """

    items: Annotated[list[BulkItemOut], Field(title="Items")]


class ContentDocument(BaseModel):
    """
    A document laid out from its title and blocks, as many pages as they take.
    """

    model_config = ConfigDict(extra="forbid")
    author: Annotated[Author | None, Field(title="Author")] = None
    content: Annotated[
        list[Annotated[TextBlock | BulletsBlock | TableBlock, Field(discriminator="type")]],
        Field(max_length=500, min_length=1, title="Content"),
    ]
    include_dependencies: Annotated[
        bool | None,
        Field(
            description="In a workflow: end with a table of the results of the jobs this one depends on, a row per dependency (its ref, then each field of its result), so one report can gather a fan-out's results.",
            title="Include Dependencies",
        ),
    ] = False
    page_size: Annotated[PageSize | None, Field(title="Page Size")] = PageSize.A4
    title: Annotated[str, Field(max_length=200, min_length=1, title="Title")]


class DeadJobOut(BaseModel):
    attempts: Annotated[int, Field(title="Attempts")]
    callback_url: Annotated[str | None, Field(title="Callback Url")]
    cancel_requested: Annotated[
        bool | None,
        Field(
            description="Its cancel was asked for while it ran: its handler is being stopped, and it ends `cancelled` unless it finished first.",
            title="Cancel Requested",
        ),
    ] = False
    client_id: Annotated[str, Field(title="Client Id")]
    concurrency: Annotated[Concurrency | None, Field(description="As submitted; null when none.")] = None
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    depends_on: Annotated[
        list[str] | None,
        Field(
            description="The ids of the jobs of its workflow it waits for; null outside a workflow.", title="Depends On"
        ),
    ] = None
    error: Annotated[dict[str, Any] | None, Field(title="Error")]
    finished_at: Annotated[AwareDatetime | None, Field(title="Finished At")]
    id: Annotated[str, Field(title="Id")]
    idempotency_key: Annotated[str | None, Field(title="Idempotency Key")]
    job_type: Annotated[str, Field(title="Job Type")]
    max_retries: Annotated[int, Field(title="Max Retries")]
    payload: Annotated[Any, Field(title="Payload")]
    priority: Annotated[int, Field(title="Priority")]
    progress: Annotated[
        JobProgress | None,
        Field(description="What its handler last reported of its run; null when it reported nothing."),
    ] = None
    rate_limit: Annotated[RateLimit | None, Field(description="As submitted; null when none.")] = None
    reason: Annotated[
        DeadReason | None,
        Field(description="retries_exhausted, permanent_error, timeout, worker_lost or unprocessable."),
    ]
    ref: Annotated[str | None, Field(description="Its name in its workflow.", title="Ref")] = None
    request_id: Annotated[str | None, Field(title="Request Id")]
    result: Annotated[Any, Field(title="Result")]
    run_at: Annotated[
        AwareDatetime | None, Field(description="When a job submitted with a time is due.", title="Run At")
    ] = None
    started_at: Annotated[AwareDatetime | None, Field(title="Started At")]
    status: JobStatus
    unique: Annotated[Unique | None, Field(description="As submitted; null when none.")] = None
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]
    workflow_id: Annotated[
        str | None, Field(description="The workflow it belongs to; null when none.", title="Workflow Id")
    ] = None


class DeadJobPage(BaseModel):
    items: Annotated[list[DeadJobOut], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(title="Next Cursor")]


class EchoJobRequest(BaseModel):
    """
    Returns its payload as the result.
    """

    model_config = ConfigDict(extra="forbid")
    callback_url: Annotated[CallbackUrl | None, Field(title="Callback Url")] = None
    concurrency: Annotated[Concurrency | None, Field(description="A concurrency key and its limit.")] = None
    delay_seconds: Annotated[
        DelaySeconds | None, Field(description="Run it this many seconds from now.", title="Delay Seconds")
    ] = None
    idempotency_key: Annotated[IdempotencyKey | None, Field(title="Idempotency Key")] = None
    job_type: Annotated[Literal["echo"], Field(title="Job Type")]
    max_retries: Annotated[
        int | None, Field(description="Retries after the first attempt.", ge=0, le=10, title="Max Retries")
    ] = 3
    payload: Annotated[Any, Field(description="Any JSON value.", title="EchoPayload")]
    priority: Annotated[int | None, Field(description="1 is most urgent, 10 least.", ge=1, le=10, title="Priority")] = 5
    rate_limit: Annotated[RateLimit | None, Field(description="A rate key: starts per period.")] = None
    run_at: Annotated[
        AwareDatetime | None,
        Field(
            description="When to run it (ISO 8601 with an offset), from 2000-01-01T00:00:00Z to a year from now; a time in the past runs now.",
            title="Run At",
        ),
    ] = None
    timeout_seconds: Annotated[TimeoutSeconds | None, Field(title="Timeout Seconds")] = None
    unique: Annotated[
        Unique | None,
        Field(description="While the client's job with this key holds it, a submit answers 200 with that job."),
    ] = None


class FailureGroupOut(BaseModel):
    count: Annotated[
        int, Field(description="Dead jobs in the group (the caller's; an admin's: every client's).", title="Count")
    ]
    error_class: Annotated[
        str,
        Field(
            description="The error's `type` as the worker recorded it (`Error` when it named none).",
            title="Error Class",
        ),
    ]
    example: GroupExample
    first_seen: Annotated[
        AwareDatetime | None, Field(description="When the group's first job died.", title="First Seen")
    ]
    id: Annotated[
        str | None,
        Field(
            description="16 hex digits of the job type, error class and masked message; null for jobs that died before failure groups were recorded and were not given one (one such group per job type).",
            title="Id",
        ),
    ]
    job_type: Annotated[str, Field(title="Job Type")]
    last_seen: Annotated[AwareDatetime | None, Field(description="When its last job died.", title="Last Seen")]
    message: Annotated[
        str,
        Field(
            description="The example's error message, its ids, numbers, times and quoted values masked.",
            title="Message",
        ),
    ]


class FailureGroupPage(BaseModel):
    items: Annotated[list[FailureGroupOut], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(title="Next Cursor")]


class FlakyJobRequest(BaseModel):
    """
    Fails its first `fail_times` runs, then succeeds.
    """

    model_config = ConfigDict(extra="forbid")
    callback_url: Annotated[CallbackUrl | None, Field(title="Callback Url")] = None
    concurrency: Annotated[Concurrency | None, Field(description="A concurrency key and its limit.")] = None
    delay_seconds: Annotated[
        DelaySeconds | None, Field(description="Run it this many seconds from now.", title="Delay Seconds")
    ] = None
    idempotency_key: Annotated[IdempotencyKey | None, Field(title="Idempotency Key")] = None
    job_type: Annotated[Literal["flaky"], Field(title="Job Type")]
    max_retries: Annotated[
        int | None, Field(description="Retries after the first attempt.", ge=0, le=10, title="Max Retries")
    ] = 3
    payload: FlakyPayload
    priority: Annotated[int | None, Field(description="1 is most urgent, 10 least.", ge=1, le=10, title="Priority")] = 5
    rate_limit: Annotated[RateLimit | None, Field(description="A rate key: starts per period.")] = None
    run_at: Annotated[
        AwareDatetime | None,
        Field(
            description="When to run it (ISO 8601 with an offset), from 2000-01-01T00:00:00Z to a year from now; a time in the past runs now.",
            title="Run At",
        ),
    ] = None
    timeout_seconds: Annotated[TimeoutSeconds | None, Field(title="Timeout Seconds")] = None
    unique: Annotated[
        Unique | None,
        Field(description="While the client's job with this key holds it, a submit answers 200 with that job."),
    ] = None


class ImageJobRequest(BaseModel):
    """
    Transforms an image (resize, thumbnail, grayscale, rotate, compress, convert).
    """

    model_config = ConfigDict(extra="forbid")
    callback_url: Annotated[CallbackUrl | None, Field(title="Callback Url")] = None
    concurrency: Annotated[Concurrency | None, Field(description="A concurrency key and its limit.")] = None
    delay_seconds: Annotated[
        DelaySeconds | None, Field(description="Run it this many seconds from now.", title="Delay Seconds")
    ] = None
    idempotency_key: Annotated[IdempotencyKey | None, Field(title="Idempotency Key")] = None
    job_type: Annotated[Literal["image"], Field(title="Job Type")]
    max_retries: Annotated[
        int | None, Field(description="Retries after the first attempt.", ge=0, le=10, title="Max Retries")
    ] = 3
    payload: ImagePayload
    priority: Annotated[int | None, Field(description="1 is most urgent, 10 least.", ge=1, le=10, title="Priority")] = 5
    rate_limit: Annotated[RateLimit | None, Field(description="A rate key: starts per period.")] = None
    run_at: Annotated[
        AwareDatetime | None,
        Field(
            description="When to run it (ISO 8601 with an offset), from 2000-01-01T00:00:00Z to a year from now; a time in the past runs now.",
            title="Run At",
        ),
    ] = None
    timeout_seconds: Annotated[TimeoutSeconds | None, Field(title="Timeout Seconds")] = None
    unique: Annotated[
        Unique | None,
        Field(description="While the client's job with this key holds it, a submit answers 200 with that job."),
    ] = None


class InvoiceData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    currency: Annotated[str | None, Field(max_length=8, min_length=1, title="Currency")] = "EUR"
    customer: Annotated[str | None, Field(max_length=500, title="Customer")] = (
        "Acme Corporation\n42 Harbour Road\nShelbyville"
    )
    due: Annotated[Due | None, Field(title="Due", validate_default=True)] = cast("Due | None", "2026-02-14")
    issued: Annotated[
        str | None, Field(description="The issue date, as it should read.", max_length=64, title="Issued")
    ] = "2026-01-15"
    lines: Annotated[list[InvoiceLine], Field(max_length=500, min_length=1, title="Lines")]
    notes: Annotated[Notes | None, Field(title="Notes")] = None
    number: Annotated[str | None, Field(max_length=64, min_length=1, title="Number")] = "INV-0001"
    seller: Annotated[str | None, Field(max_length=500, title="Seller")] = (
        "Example Supplies Ltd\n1 Market Street\nSpringfield"
    )
    tax_rate: Annotated[
        float | None, Field(description="Percent added to the subtotal.", ge=0.0, le=100.0, title="Tax Rate")
    ] = 0


class InvoiceDocument(BaseModel):
    """
    An invoice: seller and customer, its lines over the pages, and the totals on the last one.
    """

    model_config = ConfigDict(extra="forbid")
    author: Annotated[Author | None, Field(title="Author")] = None
    data: Annotated[InvoiceData | None, Field(description="The invoice; sample data when absent.")] = None
    page_size: Annotated[PageSize | None, Field(title="Page Size")] = PageSize.A4
    pages: Annotated[
        int | None,
        Field(description="Pages the document has; more only when `data` does not fit.", ge=1, le=50, title="Pages"),
    ] = 1
    template: Annotated[Literal["invoice"], Field(title="Template")]


class JobOut(BaseModel):
    """
    A job, as every endpoint returns it.
    """

    attempts: Annotated[int, Field(title="Attempts")]
    callback_url: Annotated[str | None, Field(title="Callback Url")]
    cancel_requested: Annotated[
        bool | None,
        Field(
            description="Its cancel was asked for while it ran: its handler is being stopped, and it ends `cancelled` unless it finished first.",
            title="Cancel Requested",
        ),
    ] = False
    client_id: Annotated[str, Field(title="Client Id")]
    concurrency: Annotated[Concurrency | None, Field(description="As submitted; null when none.")] = None
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    depends_on: Annotated[
        list[str] | None,
        Field(
            description="The ids of the jobs of its workflow it waits for; null outside a workflow.", title="Depends On"
        ),
    ] = None
    error: Annotated[dict[str, Any] | None, Field(title="Error")]
    finished_at: Annotated[AwareDatetime | None, Field(title="Finished At")]
    id: Annotated[str, Field(title="Id")]
    idempotency_key: Annotated[str | None, Field(title="Idempotency Key")]
    job_type: Annotated[str, Field(title="Job Type")]
    max_retries: Annotated[int, Field(title="Max Retries")]
    payload: Annotated[Any, Field(title="Payload")]
    priority: Annotated[int, Field(title="Priority")]
    progress: Annotated[
        JobProgress | None,
        Field(description="What its handler last reported of its run; null when it reported nothing."),
    ] = None
    rate_limit: Annotated[RateLimit | None, Field(description="As submitted; null when none.")] = None
    ref: Annotated[str | None, Field(description="Its name in its workflow.", title="Ref")] = None
    request_id: Annotated[str | None, Field(title="Request Id")]
    result: Annotated[Any, Field(title="Result")]
    run_at: Annotated[
        AwareDatetime | None, Field(description="When a job submitted with a time is due.", title="Run At")
    ] = None
    started_at: Annotated[AwareDatetime | None, Field(title="Started At")]
    status: JobStatus
    unique: Annotated[Unique | None, Field(description="As submitted; null when none.")] = None
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]
    workflow_id: Annotated[
        str | None, Field(description="The workflow it belongs to; null when none.", title="Workflow Id")
    ] = None


class JobPage(BaseModel):
    items: Annotated[list[JobOut], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(title="Next Cursor")]


class NotificationJobRequest(BaseModel):
    """
    Makes one HTTP call (an HTTP target: any service as a handler), signed like a webhook delivery with a `secret`; a 2xx answer's JSON body is the result; 5xx and timeouts are retried, after a 429's or 503's Retry-After.
    """

    model_config = ConfigDict(extra="forbid")
    callback_url: Annotated[CallbackUrl | None, Field(title="Callback Url")] = None
    concurrency: Annotated[Concurrency | None, Field(description="A concurrency key and its limit.")] = None
    delay_seconds: Annotated[
        DelaySeconds | None, Field(description="Run it this many seconds from now.", title="Delay Seconds")
    ] = None
    idempotency_key: Annotated[IdempotencyKey | None, Field(title="Idempotency Key")] = None
    job_type: Annotated[Literal["notification"], Field(title="Job Type")]
    max_retries: Annotated[
        int | None, Field(description="Retries after the first attempt.", ge=0, le=10, title="Max Retries")
    ] = 3
    payload: NotificationPayload
    priority: Annotated[int | None, Field(description="1 is most urgent, 10 least.", ge=1, le=10, title="Priority")] = 5
    rate_limit: Annotated[RateLimit | None, Field(description="A rate key: starts per period.")] = None
    run_at: Annotated[
        AwareDatetime | None,
        Field(
            description="When to run it (ISO 8601 with an offset), from 2000-01-01T00:00:00Z to a year from now; a time in the past runs now.",
            title="Run At",
        ),
    ] = None
    timeout_seconds: Annotated[TimeoutSeconds | None, Field(title="Timeout Seconds")] = None
    unique: Annotated[
        Unique | None,
        Field(description="While the client's job with this key holds it, a submit answers 200 with that job."),
    ] = None


class OverviewOut(BaseModel):
    by_type: Annotated[
        list[TypeCounts], Field(description="Jobs by type and status, as of `by_type_at`.", title="By Type")
    ]
    by_type_at: Annotated[
        AwareDatetime,
        Field(
            description="When `by_type`, `timings` and the finished totals were counted: a scan of every job's index entry, made at most every 30 s per scope in the background (the answer never waits for it but the first).",
            title="By Type At",
        ),
    ]
    counts: Annotated[
        dict[str, int],
        Field(
            description="Jobs by status, every status named (0 for none): the live ones and `dead_lettered` read now, `succeeded` and `cancelled` as of `by_type_at`.",
            title="Counts",
        ),
    ]
    dlq: DlqTrend
    failing_endpoints: Annotated[
        list[FailingEndpoint],
        Field(
            description="The caller's endpoints with an open circuit or a failed attempt in the last 15 minutes.",
            title="Failing Endpoints",
        ),
    ]
    fresh_for_seconds: Annotated[
        float, Field(description="How long this answer is served again to the same scope.", title="Fresh For Seconds")
    ]
    generated_at: Annotated[
        AwareDatetime, Field(description="When the figures were read from the database.", title="Generated At")
    ]
    throughput: Throughput
    timings: Annotated[
        list[Timing],
        Field(description="Run time and queue wait per type, over the hour before `by_type_at`.", title="Timings"),
    ]


class RedriveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    event_type: Annotated[
        EventType | None, Field(description="Deliveries: of this event type.", title="Event Type")
    ] = None
    group: Annotated[Group | None, Field(description="Jobs: a failure group's id (/dlq/groups).", title="Group")] = None
    job_ids: Annotated[JobIds | None, Field(description="Jobs: these ids.", title="Job Ids")] = None
    job_type: Annotated[JobType | None, Field(description="Jobs: of this type.", title="Job Type")] = None
    kind: Annotated[RedriveKind, Field(description="`jobs`: dead jobs; `deliveries`: failed webhook deliveries.")]
    limit: Annotated[int, Field(description="How many items to send again, at most.", ge=1, le=100000, title="Limit")]
    per_second: Annotated[
        float,
        Field(
            description="The pace: at most this many a second (fractions allowed: 0.5 is one every two seconds).",
            gt=0.0,
            le=1000.0,
            title="Per Second",
        ),
    ]
    webhook_id: Annotated[WebhookId | None, Field(description="Deliveries: to this endpoint.", title="Webhook Id")] = (
        None
    )


class RedriveOut(BaseModel):
    client_id: Annotated[
        str | None,
        Field(description="Whose items it sends again; null for an admin's: every client's.", title="Client Id"),
    ]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    created_by: Annotated[str, Field(title="Created By")]
    finished_at: Annotated[AwareDatetime | None, Field(title="Finished At")]
    history: Annotated[list[RedriveChange], Field(title="History")]
    id: Annotated[str, Field(title="Id")]
    kind: RedriveKind
    limit: Annotated[int, Field(title="Limit")]
    per_second: Annotated[float, Field(title="Per Second")]
    replayed: Annotated[int, Field(description="Items sent again so far.", title="Replayed")]
    selection: Annotated[dict[str, Any], Field(title="Selection")]
    skipped: Annotated[
        int, Field(description="Items no longer failed when reached (replayed or removed meanwhile).", title="Skipped")
    ]
    status: RedriveStatus
    total: Annotated[
        int, Field(description="The items it took when it was created (at most its `limit`).", title="Total")
    ]
    updated_at: Annotated[AwareDatetime, Field(title="Updated At")]


class RedrivePage(BaseModel):
    items: Annotated[list[RedriveOut], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(title="Next Cursor")]


class ReportData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sections: Annotated[list[ReportSection], Field(max_length=200, min_length=1, title="Sections")]
    summary: Annotated[Summary | None, Field(title="Summary")] = None
    title: Annotated[str | None, Field(max_length=200, min_length=1, title="Title")] = "Quarterly report"


class ReportDocument(BaseModel):
    """
    A report: its title and summary first, then its sections spread over the pages.
    """

    model_config = ConfigDict(extra="forbid")
    author: Annotated[Author | None, Field(title="Author")] = None
    data: Annotated[ReportData | None, Field(description="The report; sample data when absent.")] = None
    page_size: Annotated[PageSize | None, Field(title="Page Size")] = PageSize.A4
    pages: Annotated[
        int | None,
        Field(description="Pages the document has; more only when `data` does not fit.", ge=1, le=50, title="Pages"),
    ] = 1
    template: Annotated[Literal["report"], Field(title="Template")]


class SleepJobRequest(BaseModel):
    """
    Sleeps for `seconds`; handy for testing timeouts and crashes.
    """

    model_config = ConfigDict(extra="forbid")
    callback_url: Annotated[CallbackUrl | None, Field(title="Callback Url")] = None
    concurrency: Annotated[Concurrency | None, Field(description="A concurrency key and its limit.")] = None
    delay_seconds: Annotated[
        DelaySeconds | None, Field(description="Run it this many seconds from now.", title="Delay Seconds")
    ] = None
    idempotency_key: Annotated[IdempotencyKey | None, Field(title="Idempotency Key")] = None
    job_type: Annotated[Literal["sleep"], Field(title="Job Type")]
    max_retries: Annotated[
        int | None, Field(description="Retries after the first attempt.", ge=0, le=10, title="Max Retries")
    ] = 3
    payload: SleepPayload
    priority: Annotated[int | None, Field(description="1 is most urgent, 10 least.", ge=1, le=10, title="Priority")] = 5
    rate_limit: Annotated[RateLimit | None, Field(description="A rate key: starts per period.")] = None
    run_at: Annotated[
        AwareDatetime | None,
        Field(
            description="When to run it (ISO 8601 with an offset), from 2000-01-01T00:00:00Z to a year from now; a time in the past runs now.",
            title="Run At",
        ),
    ] = None
    timeout_seconds: Annotated[TimeoutSeconds | None, Field(title="Timeout Seconds")] = None
    unique: Annotated[
        Unique | None,
        Field(description="While the client's job with this key holds it, a submit answers 200 with that job."),
    ] = None


class WorkflowJobOut(BaseModel):
    """
    One job of a workflow: its ref, the job, and the refs it depends on.
    """

    depends_on: Annotated[list[str], Field(title="Depends On")]
    job: JobOut
    ref: Annotated[str, Field(title="Ref")]


class WorkflowOut(BaseModel):
    """
    A workflow: its status from its jobs', its jobs' counts by status, and (one workflow) its jobs.
    """

    client_id: Annotated[str, Field(title="Client Id")]
    counts: Annotated[dict[str, int], Field(description="Its jobs by status.", title="Counts")]
    created_at: Annotated[AwareDatetime, Field(title="Created At")]
    finished_at: Annotated[AwareDatetime | None, Field(title="Finished At")]
    id: Annotated[str, Field(title="Id")]
    jobs: Annotated[
        list[WorkflowJobOut] | None,
        Field(description="Every job, in the order submitted (empty in a list of workflows).", title="Jobs"),
    ] = None
    name: Annotated[str | None, Field(title="Name")]
    on_failure: OnFailure
    status: WorkflowStatus


class WorkflowPage(BaseModel):
    items: Annotated[list[WorkflowOut], Field(title="Items")]
    next_cursor: Annotated[str | None, Field(title="Next Cursor")]


class BatchItemOut(BaseModel):
    """
    One job of a batch, in the place its request had.
    """

    job: JobOut
    outcome: Annotated[
        Submitted,
        Field(
            description="`created`: saved and confirmed by the broker; `pending`: saved, published once the broker is back (as a single submit's 202); `existing`: an earlier job with this idempotency key and request, or the job holding this unique key (as a single submit's 200)."
        ),
    ]


class BatchOut(BaseModel):
    """
    The answer to a batch: every job, in request order.
    """

    items: Annotated[list[BatchItemOut], Field(title="Items")]


class DocumentJobRequest(BaseModel):
    """
    A PDF artifact: headings, paragraphs, bullet lists and tables laid out from `title` + `content`, or a named `template` (invoice, report, letter) filled from `data` over `pages` pages.
    """

    model_config = ConfigDict(extra="forbid")
    callback_url: Annotated[CallbackUrl | None, Field(title="Callback Url")] = None
    concurrency: Annotated[Concurrency | None, Field(description="A concurrency key and its limit.")] = None
    delay_seconds: Annotated[
        DelaySeconds | None, Field(description="Run it this many seconds from now.", title="Delay Seconds")
    ] = None
    idempotency_key: Annotated[IdempotencyKey | None, Field(title="Idempotency Key")] = None
    job_type: Annotated[Literal["document"], Field(title="Job Type")]
    max_retries: Annotated[
        int | None, Field(description="Retries after the first attempt.", ge=0, le=10, title="Max Retries")
    ] = 3
    payload: Annotated[
        ContentDocument | InvoiceDocument | ReportDocument | LetterDocument,
        Field(
            description="Either `title` + `content` (blocks laid out in order), or a named `template` (invoice, report, letter)\nfilled from `data`, or from sample data when `data` is absent, over `pages` pages.",
            examples=[
                {"pages": 3, "template": "invoice"},
                {"data": {"paragraphs": ["Your order ships today."], "recipient": "Ms Jane Doe"}, "template": "letter"},
                {"content": [{"text": "Invoice #12345", "type": "heading"}], "title": "Monthly Invoice"},
            ],
            title="DocumentPayload",
        ),
    ]
    priority: Annotated[int | None, Field(description="1 is most urgent, 10 least.", ge=1, le=10, title="Priority")] = 5
    rate_limit: Annotated[RateLimit | None, Field(description="A rate key: starts per period.")] = None
    run_at: Annotated[
        AwareDatetime | None,
        Field(
            description="When to run it (ISO 8601 with an offset), from 2000-01-01T00:00:00Z to a year from now; a time in the past runs now.",
            title="Run At",
        ),
    ] = None
    timeout_seconds: Annotated[TimeoutSeconds | None, Field(title="Timeout Seconds")] = None
    unique: Annotated[
        Unique | None,
        Field(description="While the client's job with this key holds it, a submit answers 200 with that job."),
    ] = None


class JobRequest(
    RootModel[
        EchoJobRequest
        | SleepJobRequest
        | FlakyJobRequest
        | DocumentJobRequest
        | ImageJobRequest
        | NotificationJobRequest
    ]
):
    root: Annotated[
        EchoJobRequest
        | SleepJobRequest
        | FlakyJobRequest
        | DocumentJobRequest
        | ImageJobRequest
        | NotificationJobRequest,
        Field(
            discriminator="job_type",
            examples=[
                {
                    "idempotency_key": "order-123",
                    "job_type": "echo",
                    "max_retries": 3,
                    "payload": {"any": "json"},
                    "priority": 5,
                },
                {"job_type": "document", "payload": {"pages": 3, "template": "invoice"}},
                {"job_type": "sleep", "payload": {"seconds": 0.5}, "timeout_seconds": 60},
                {
                    "concurrency": {"key": "export:customer-7", "limit": 2},
                    "job_type": "echo",
                    "payload": {"export": "customer-7"},
                    "rate_limit": {"key": "partner-api", "limit": 10, "period_seconds": 1},
                },
                {
                    "job_type": "echo",
                    "payload": {"sync": "user-42"},
                    "unique": {"for_seconds": 300, "key": "sync-user-42"},
                },
            ],
        ),
    ]


class ScheduleCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    active: Annotated[bool | None, Field(title="Active")] = True
    cron: Annotated[
        str,
        Field(
            description="Five fields (minute hour day month weekday), or six with seconds last; one that never fires (the 31st of February) is refused.",
            examples=["0 3 * * *"],
            max_length=255,
            title="Cron",
        ),
    ]
    job: Annotated[
        EchoJobRequest
        | SleepJobRequest
        | FlakyJobRequest
        | DocumentJobRequest
        | ImageJobRequest
        | NotificationJobRequest,
        Field(
            description="The job each firing submits, as the body of POST /api/v1/jobs.",
            discriminator="job_type",
            title="Job",
        ),
    ]
    name: Annotated[str, Field(max_length=200, min_length=1, title="Name")]
    timezone: Annotated[
        str | None,
        Field(
            description="An IANA time zone name (`Europe/Lisbon`), not a folder of them (`Europe`).",
            examples=["UTC"],
            max_length=64,
            title="Timezone",
        ),
    ] = "UTC"


class ScheduleUpdate(BaseModel):
    """
    The fields to change; a field left out keeps its value, and none may be null.
    """

    model_config = ConfigDict(extra="forbid")
    active: Annotated[bool | None, Field(title="Active")] = None
    cron: Annotated[
        str | None,
        Field(
            description="Five fields (minute hour day month weekday), or six with seconds last; one that never fires (the 31st of February) is refused.",
            examples=["0 3 * * *"],
            max_length=255,
            title="Cron",
        ),
    ] = None
    job: Annotated[
        EchoJobRequest
        | SleepJobRequest
        | FlakyJobRequest
        | DocumentJobRequest
        | ImageJobRequest
        | NotificationJobRequest
        | None,
        Field(discriminator="job_type", title="Job"),
    ] = None
    name: Annotated[str | None, Field(max_length=200, min_length=1, title="Name")] = None
    timezone: Annotated[
        str | None,
        Field(
            description="An IANA time zone name (`Europe/Lisbon`), not a folder of them (`Europe`).",
            examples=["UTC"],
            max_length=64,
            title="Timezone",
        ),
    ] = None
