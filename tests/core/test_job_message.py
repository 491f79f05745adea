"""The job message as a lane carries it: its fields round-trip, and a grant's end, when a release gave it one, says
until when its claim may skip the admission (with a margin for the clocks)."""

from datetime import UTC, datetime

from app.core.messages import GRANT_MARGIN_SECONDS, JobMessage
from tests.support import make_job

GRANTED_AT = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)


def test_a_granted_keyed_job_says_until_when_its_grant_holds_and_round_trips() -> None:
    row = make_job(concurrency_key="k", concurrency_limit=1, runs=2, granted_run=3, granted_at=GRANTED_AT)
    message = JobMessage.from_row(row, grant_seconds=30)
    until = GRANTED_AT.timestamp() + 30
    assert (message.keyed, message.granted_until) == (True, until)
    assert JobMessage.from_bytes(message.to_bytes()) == message
    assert message.admitted(GRANTED_AT.timestamp())
    assert not message.admitted(until - GRANT_MARGIN_SECONDS)  # too close to its end: admitted again
    assert not message.admitted(until + 1)


def test_no_grant_or_a_used_one_or_no_key_means_the_admission_runs() -> None:
    keyed = {"concurrency_key": "k", "concurrency_limit": 1, "granted_at": GRANTED_AT}
    used = JobMessage.from_row(make_job(**keyed, runs=3, granted_run=3), grant_seconds=30)  # its run took it
    plain = JobMessage.from_row(make_job(runs=0, granted_run=1, granted_at=GRANTED_AT), grant_seconds=30)
    unsaid = JobMessage.from_row(make_job(**keyed, runs=0, granted_run=1))  # released by no flow control
    assert [m.granted_until for m in (used, plain, unsaid)] == [None, None, None]
    assert not any(m.admitted(GRANTED_AT.timestamp()) for m in (used, plain, unsaid))
    old = JobMessage.from_bytes(b'{"job_id": "j", "job_type": "echo", "keyed": true}')  # a message from before
    assert old.keyed and old.granted_until is None
