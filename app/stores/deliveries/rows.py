"""The rows the deliveries store writes, built the same way on every database: a fan-out's new deliveries and their
messages, an attempt's log row, and the audit rows of a delivery's outcome."""

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from app.core.broker import Outgoing
from app.core.messages import JobEvent, delivery_id, delivery_outgoing, endpoint_key
from app.core.names import JOB_EVENTS, SUBSCRIBABLE_EVENTS, Names
from app.core.statuses import DeliveryOutcome, DeliveryStatus, TrailEvent
from app.models.rows import AttemptRow, DeliveryRow, TrailRow
from app.stores.deliveries import CALLBACK, Fanned, Recording, Target

BODY_LIMIT = 4096


def wanted_ids(fanned: list[Fanned]) -> list[list[str]]:
    """Each event's delivery ids, one per target (rule 10: the same event and target, the same delivery)."""
    return [[delivery_id(f.event_id, t.key) for t in f.targets] for f in fanned]


def new_rows(
    fanned: list[Fanned], wanted: list[list[str]], existing: set[str], now: datetime
) -> tuple[list[DeliveryRow], list[int]]:
    """The delivery rows to insert (none already in `existing`), and the index of the event each is for."""
    rows: list[DeliveryRow] = []
    owners: list[int] = []
    for index, (item, ids) in enumerate(zip(fanned, wanted, strict=True)):
        for target, row_id in zip(item.targets, ids, strict=True):
            if row_id in existing:
                continue
            existing.add(row_id)  # an event twice in one batch still makes one delivery (rule 10)
            rows.append(_delivery_row(row_id, item, target, now))
            owners.append(index)
    return rows, owners


def _delivery_row(row_id: str, item: Fanned, target: Target, now: datetime) -> DeliveryRow:
    return {
        "id": row_id,
        "event_id": item.event_id,
        "target": target.key,
        "endpoint_id": target.endpoint_id,
        "client_id": item.client_id,
        "job_id": item.job_id,
        "event_type": item.event_type,
        "url": target.url,
        "body": item.body,
        "request_id": item.request_id,
        "status": DeliveryStatus.PENDING,
        "attempt_count": 0,
        "budget_used": 0,
        "next_attempt_at": None,
        "lease_until": None,
        "created_at": now,
        "updated_at": now,
    }


def messages_of(names: Names, rows: list[DeliveryRow], owners: list[int], fanned: list[Fanned]) -> list[Outgoing]:
    """The message that asks for each new delivery's first attempt (with its event's fan-out's trace context, when
    tracing is on: each attempt continues that trace)."""
    messages = []
    for row, owner in zip(rows, owners, strict=True):
        message = delivery_outgoing(names, row["id"], row["request_id"], endpoint_key(row["endpoint_id"], row["url"]))
        message.headers.update(fanned[owner].trace or {})
        messages.append(message)
    return messages


def targets_of(events: list[JobEvent], endpoints: Iterable[Mapping[Any, Any]]) -> list[list[Target]]:
    """For each job event, the endpoints among `endpoints` (the active ones of the events' clients, in the order
    they were registered) subscribed to it, then the job's callback URL (for an endpoint's default events)."""
    found: list[list[Target]] = []
    rows = list(endpoints)
    for event in events:
        if event.type not in SUBSCRIBABLE_EVENTS:
            found.append([])
            continue
        job = event.job
        targets = [
            Target(row["id"], row["url"], row["id"])
            for row in rows
            if row["client_id"] == job["client_id"]
            and row["job_type"] in (None, job["job_type"])
            and row["job_id"] in (None, job["id"])
            and event.type in row["events"]
        ]
        if job.get("callback_url") and event.type in JOB_EVENTS:  # the default events, never job.progress
            targets.append(Target(CALLBACK, job["callback_url"], None))
        found.append(targets)
    return found


def clients_of(events: list[JobEvent]) -> set[str]:
    """The clients whose jobs' events may have endpoints subscribed to them."""
    return {event.job["client_id"] for event in events if event.type in SUBSCRIBABLE_EVENTS}


def attempt_row(recording: Recording, now: datetime) -> AttemptRow:
    attempt = recording.attempt
    return {
        "delivery_id": recording.delivery["id"],
        "attempt": recording.delivery["attempt_count"] + 1,
        "status_code": attempt.status_code,
        "duration_ms": attempt.duration_ms,
        "error": _text(attempt.error, 1000),
        "response_body": _text(attempt.response_body, BODY_LIMIT),
        "created_at": now,
        "next_attempt_at": recording.next_at,
    }


def _text(value: str | None, limit: int) -> str | None:
    """What a receiver answered, as a text column holds it: cut to `limit`, NUL characters replaced (PostgreSQL
    refuses them in text, and one odd answer must not make the attempt unrecordable)."""
    return value[:limit].replace("\x00", "\ufffd") if value else None


def trail_row(job_id: str, detail: dict[str, Any], now: datetime) -> TrailRow:
    """A job's audit row for one of its deliveries."""
    return {"job_id": job_id, "event": TrailEvent.DELIVERY, "detail": detail, "created_at": now}


def failed_trail(deliveries: Iterable[tuple[str, str | None]], why: str, now: datetime) -> list[TrailRow]:
    """The audit rows of deliveries (delivery id, job id) failed unsent."""
    return [
        trail_row(job_id, {"delivery_id": delivery_id, "outcome": DeliveryOutcome.FAILED, "error": why}, now)
        for delivery_id, job_id in deliveries
        if job_id
    ]


def recorded_trail(recordings: Iterable[Recording], now: datetime) -> list[TrailRow]:
    """The audit rows of recorded attempts (of deliveries for a job: a test ping has none)."""
    return [trail_row(r.delivery["job_id"], _detail(r), now) for r in recordings if r.delivery["job_id"]]


def _detail(recording: Recording) -> dict[str, Any]:
    delivery, attempt = recording.delivery, recording.attempt
    return {
        "delivery_id": delivery["id"],
        "webhook_id": delivery["endpoint_id"],
        "url": delivery["url"],
        "event_type": delivery["event_type"],
        "attempt": delivery["attempt_count"] + 1,
        "status_code": attempt.status_code,
        "duration_ms": round(attempt.duration_ms, 1),
        "outcome": recording.outcome,
        **({"error": attempt.error} if attempt.error else {}),
    }
