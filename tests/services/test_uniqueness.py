"""What decides that a unique key still holds, and the statements that find and release keys as MSSQL gets them
(DESIGN.md rule 14: no row values; rendered, as the migrations are)."""

from datetime import UTC, datetime, timedelta

from sqlalchemy.dialects import mssql

from app.core.statuses import JobStatus
from app.services.uniqueness import holding, holds, releasing
from tests.support import make_job

NOW = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)


def test_a_key_holds_while_its_job_is_not_terminal_or_within_its_window() -> None:
    created = NOW - timedelta(seconds=300)
    for status in ("pending", "scheduled", "waiting", "queued", "running", "retrying"):
        assert holds(make_job(status=status, created_at=created, unique_seconds=None), NOW), status
    for status in ("succeeded", "dead_lettered", "cancelled"):
        assert not holds(make_job(status=status, created_at=created, unique_seconds=None), NOW), status
        assert not holds(make_job(status=status, created_at=created, unique_seconds=300), NOW), status
        assert holds(make_job(status=status, created_at=created, unique_seconds=301), NOW), status
    assert not holds(make_job(status=JobStatus.SUCCEEDED, created_at=created, unique_seconds=0), NOW)


def test_the_look_and_the_release_render_for_mssql_without_row_values() -> None:
    look = str(holding({("acme", "sync-1"), ("acme", "sync-2")}).compile(dialect=mssql.dialect()))
    assert "jobs.unique_live IN (__[POSTCOMPILE_unique_live_1])" in look
    assert "jobs.client_id IN (__[POSTCOMPILE_client_id_1])" in look
    assert "(jobs.client_id, jobs.unique_live)" not in look
    release = releasing(["a", "b"]).compile(dialect=mssql.dialect())
    assert str(release).startswith("UPDATE jobs SET unique_live=:unique_live WHERE jobs.id IN")
    assert "jobs.unique_live IS NOT NULL" in str(release)
    assert sorted(release.params["status_1"]) == ["cancelled", "dead_lettered", "succeeded"]
