"""Job events as the API and the workers share them (app/core/messages.py): one type per status, built by
`event_type` wherever a type is named, and the typed form a subscriber reads back."""

from datetime import UTC, datetime

import pytest

from app.core.messages import JobEvent, bundle, dumps, event_id, events_of, job_event, loads, public_job
from app.core.names import SUBSCRIBABLE_EVENTS, Names, event_type
from app.core.statuses import JobStatus
from tests.conftest import NS
from tests.support import make_job

NAMES = Names(NS)
AT = datetime(2026, 3, 4, 5, 6, 7, 890, tzinfo=UTC)


@pytest.mark.parametrize("status", list(JobStatus))
def test_the_event_of_a_change_is_typed_after_its_status(status: JobStatus) -> None:
    job = make_job(status=status, seq=3, request_id="req-1")
    event = JobEvent.from_bytes(job_event(NAMES, job, AT).body)
    assert event_type(status) == f"job.{status}"
    assert (event.id, event.type, event.seq) == (event_id(job["id"], 3), event_type(status), 3)
    assert event.job == loads(dumps(public_job(job)))  # the job as clients see it, in JSON
    assert event.created_at == "2026-03-04T05:06:07.000890+00:00"


def test_the_subscribable_events_are_the_types_of_the_changes_a_client_acts_on() -> None:
    assert SUBSCRIBABLE_EVENTS == (
        "job.succeeded",
        "job.dead_lettered",
        "job.retrying",
        "job.cancelled",
        "job.progress",
        "workflow.succeeded",
        "workflow.failed",
        "workflow.cancelled",
    )


def test_each_event_of_a_bundle_reads_as_alone() -> None:
    jobs = [make_job(status=JobStatus.RUNNING, seq=2) for _ in range(3)]
    events = [job_event(NAMES, job, AT) for job in jobs]
    read = [JobEvent.from_bytes(body) for body in events_of(bundle(events).body)]
    assert read == [JobEvent.from_bytes(event.body) for event in events]
    assert [event.job["id"] for event in read] == [job["id"] for job in jobs]


def test_an_event_without_its_time_still_reads() -> None:
    body = {"id": "evt_1", "type": "job.queued", "seq": 1, "data": {"job": {"id": "j"}}}
    assert JobEvent.from_bytes(dumps(body)) == JobEvent("evt_1", "job.queued", 1, {"id": "j"})


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'"job.queued"',
        b'{"id": "evt_1", "type": "job.queued", "seq": 1}',
        b'{"id": "evt_1", "type": "job.queued", "seq": 1, "data": {}}',
        b'{"id": "evt_1", "type": "job.queued", "seq": 1, "data": {"job": ["j"]}}',
        b'{"type": "job.queued", "seq": 1, "data": {"job": {}}}',
    ],
)
def test_a_body_that_holds_no_job_event_is_a_value_error(body: bytes) -> None:
    with pytest.raises(ValueError):
        JobEvent.from_bytes(body)
