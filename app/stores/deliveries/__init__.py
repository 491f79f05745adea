"""The deliveries aggregate's store: one delivery per event and endpoint (rule 10), staged with its message; a claim
by lease; each attempt logged with the delivery's new status, fenced by the claim; a lease given back; a delivery
failed unsent or sent again. Each method takes a batch and does its work in one transaction (one statement on
PostgreSQL where it can), its audit rows written by the jobs store. Two implementations:
`portable.PortableDeliveries` (SQLite, MSSQL by rendering) and `postgres.PgDeliveries` (array statements), chosen
once by `app.stores.open_stores`."""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import ColumnElement
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.messages import JobEvent
from app.core.statuses import DeliveryOutcome, DeliveryStatus
from app.models.rows import DeliveryRow
from app.stores.outbox import Pending

CALLBACK = "callback"  # the target key of a job's own callback URL
GONE = 410
Event = tuple[JobEvent, bytes, str | None]  # a job event, its body as published, its request id


@dataclass(frozen=True)
class Target:
    """Where an event goes: an endpoint (by id), or the job's own callback URL."""

    key: str
    url: str
    endpoint_id: str | None


@dataclass(frozen=True)
class Fanned:
    """One event with the targets it goes to: what a delivery row records of it, and its body as published."""

    event_id: str
    event_type: str
    client_id: str
    job_id: str | None  # None for an endpoint's test event
    body: bytes
    targets: list[Target]
    request_id: str | None
    trace: dict[str, str] | None = None  # the fan-out's trace context, for its deliveries' messages (tracing on)

    @classmethod
    def of(cls, event: JobEvent, body: bytes, targets: list[Target], request_id: str | None) -> "Fanned":
        client, job = event.job["client_id"], event.job["id"]
        return cls(event.id, event.type, client, job, body, targets, request_id, event.trace)


@dataclass(frozen=True)
class Attempt:
    status_code: int | None
    duration_ms: float
    error: str | None
    response_body: str | None
    retry_after: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True)
class Recording:
    """An attempt to log: the delivery as claimed, the attempt, the status it leads to (pending: a retry due at
    `next_at`), and whether its endpoint was failing when claimed (if not, a success leaves the endpoint alone)."""

    delivery: DeliveryRow
    attempt: Attempt
    status: DeliveryStatus
    next_at: datetime | None = None
    failing: bool = False

    @property
    def outcome(self) -> DeliveryOutcome:
        return DeliveryOutcome.RETRYING if self.status == DeliveryStatus.PENDING else DeliveryOutcome(self.status)

    @property
    def judged(self) -> bool:
        """Whether the attempt feeds its endpoint's health: a failure, or any answer from an endpoint failing
        already (a success at a healthy endpoint changes nothing)."""
        return bool(self.delivery["endpoint_id"]) and (self.failing or not self.attempt.ok)


@dataclass(frozen=True)
class Taken:
    """What a claim found: the deliveries it leased, each with its signing secrets (newest first; none when its
    endpoint is gone or disabled); the endpoints failing among theirs; the deliveries it did not lease, as they
    stand."""

    claimed: list[DeliveryRow]
    secrets: dict[str, list[str]]
    failing: set[str]
    seen: dict[str, DeliveryRow]


# What a record batch's attempts say about their endpoints, judged in the record's transaction (the recordings
# that were still ours and feed their endpoint's health, and the time they were recorded).
Judge = Callable[[AsyncConnection, list[Recording], datetime], Awaitable[None]]


class DeliveryStore(Protocol):
    async def fan_out(self, events: list[Event]) -> list[list[Pending]]:
        """One delivery per matching endpoint (and callback URL) for each event; a twice-published event adds
        none. The messages to publish, one list per event."""

    async def stage(self, conn: AsyncConnection, fanned: list[Fanned]) -> list[list[Pending]]:
        """The deliveries these events do not have yet, each with its message staged, in the caller's
        transaction; one list of staged messages per event."""

    async def claim(self, delivery_ids: list[str], now: datetime, lease: datetime) -> Taken:
        """The pending, due and unleased among `delivery_ids` leased until `lease` (a compare-and-set, so two live
        workers never send one at once), with what signing them needs; the others read."""

    async def release(self, claimed: list[DeliveryRow]) -> None:
        """Leases given back without an attempt, where each claim still holds."""

    async def abandon(self, claimed: list[DeliveryRow], why: str) -> None:
        """Claimed deliveries whose endpoints are gone or disabled -> failed, unsent, with their audit rows."""

    async def give_up(self, delivery_id: str, why: str) -> bool:
        """A pending delivery whose message could not be processed -> failed, unsent, with its audit row; False
        when it is no longer pending (or there is no such delivery)."""

    async def record(self, batch: list[Recording], judge: Judge) -> list[bool]:
        """Each attempt logged and its delivery moved to its new status (succeeded, failed, or pending for a retry),
        fenced by the attempt count it was claimed with, its endpoint judged; False for a delivery a newer claim
        owns."""

    async def redeliver(self, where: tuple[ColumnElement[bool], ...]) -> tuple[list[str], list[Pending]]:
        """The deliveries `where` selects -> pending and due now with a fresh retry budget, each with an operator's
        message staged: their ids, and the messages to publish."""
