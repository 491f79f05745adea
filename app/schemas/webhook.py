"""Webhook endpoints and deliveries as clients see them."""

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic.json_schema import SkipJsonSchema

from app.core.names import JOB_EVENTS, SUBSCRIBABLE_EVENTS, TEST_EVENT
from app.core.statuses import DeliveryStatus
from app.schemas.payloads.registry import PAYLOADS
from app.schemas.requests import REQUEST_CONFIG, RequestTime

EventType: Any = Literal[SUBSCRIBABLE_EVENTS]
DeliveredEvent: Any = Literal[(*SUBSCRIBABLE_EVENTS, TEST_EVENT)]  # what a delivery may carry
DeliveryStatusName: Any = Literal[tuple(status.value for status in DeliveryStatus)]
URL_RULES: dict[str, Any] = {
    "max_length": 2048,
    "pattern": r"^https?://",
    "description": "An http(s) URL that resolves to a public address.",
}


class WebhookCreate(BaseModel):
    model_config = REQUEST_CONFIG

    url: str = Field(**URL_RULES)
    events: list[EventType] = Field(default_factory=lambda: list(JOB_EVENTS), min_length=1)
    job_type: str | None = Field(default=None, description="Only events of jobs of this type.")
    job_id: str | None = Field(default=None, max_length=36, description="Only events of this job.")
    description: str | None = Field(default=None, max_length=500)

    @field_validator("job_type")
    @classmethod
    def _known_type(cls, value: str | None) -> str | None:
        if value is not None and value not in PAYLOADS:
            raise ValueError(f"unknown job type; known: {', '.join(sorted(PAYLOADS))}")
        return value


NOT_NULL = ("url", "events", "active")


class WebhookUpdate(BaseModel):
    """The fields to change; a field left out keeps its value. Only `description` may be set to null."""

    model_config = REQUEST_CONFIG

    url: Annotated[str, Field(**URL_RULES)] | SkipJsonSchema[None] = None
    events: Annotated[list[EventType], Field(min_length=1)] | SkipJsonSchema[None] = None
    description: str | None = Field(default=None, max_length=500)
    active: bool | SkipJsonSchema[None] = None

    @model_validator(mode="after")
    def _no_nulls(self) -> "WebhookUpdate":
        nulls = [name for name in NOT_NULL if name in self.model_fields_set and getattr(self, name) is None]
        if nulls:
            raise ValueError(f"{', '.join(nulls)} cannot be null; leave a field out to keep its value")
        return self


class WebhookOut(BaseModel):
    """An endpoint; its secret is never shown again after creation."""

    id: str
    client_id: str
    url: str
    events: list[str]
    job_type: str | None
    job_id: str | None
    description: str | None
    active: bool
    disabled_reason: str | None
    created_at: datetime
    updated_at: datetime


class WebhookCreated(WebhookOut):
    secret: str = Field(description="`whsec_…`: shown this once; verify deliveries with it.")


class SecretOut(BaseModel):
    secret: str


class RecoverIn(BaseModel):
    model_config = REQUEST_CONFIG

    since: RequestTime


class RecoverOut(BaseModel):
    recovered: int
    delivery_ids: list[str]


class DeliveryQueued(BaseModel):
    delivery_id: str


class AttemptOut(BaseModel):
    attempt: int
    status_code: int | None
    duration_ms: float
    error: str | None
    response_body: str | None
    created_at: datetime
    next_attempt_at: datetime | None


class DeliveryOut(BaseModel):
    id: str = Field(description="The `webhook-id` every attempt of this delivery carries.")
    event_type: str
    job_id: str | None
    webhook_id: str | None = Field(description="The endpoint; null for a job's own callback_url.")
    url: str
    # Each status by name: shown inline, as before the field took the enum, rather than as a reference to it.
    status: Literal[DeliveryStatus.PENDING, DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED]
    created_at: datetime
    attempts: list[AttemptOut]


class Latency(BaseModel):
    p50: float | None = Field(description="Milliseconds; null with no attempt in the window.")
    p95: float | None


class LastError(BaseModel):
    at: datetime
    status_code: int | None = Field(description="Null when no answer came (a timeout, a refused connection).")
    error: str | None


class WebhookStatsOut(BaseModel):
    """An endpoint's deliveries made in the window, and their attempts; its circuit and in-flight count now."""

    window: Literal["1h", "24h"]
    deliveries: int = Field(description="Deliveries made in the window, whatever their status now.")
    succeeded: int
    failed: int
    pending: int
    attempts: int = Field(description="The attempts of those deliveries.")
    success_rate: float | None = Field(
        description="The share of those attempts answered 2xx (of attempts, not deliveries), 0 to 1; null with none."
    )
    latency_ms: Latency = Field(description="Those attempts' durations, nearest-rank percentiles.")
    last_error: LastError | None = Field(description="The latest of those attempts that failed.")
    circuit: Literal["closed", "open", "half_open"] = Field(description="The endpoint's circuit breaker now.")
    in_flight: int = Field(description="Its deliveries pending now, whenever made: waiting for an attempt or sending.")
