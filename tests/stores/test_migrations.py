"""The migrations: rendered for MSSQL and PostgreSQL, applied to SQLite by `python -m app migrate`, and in
agreement with the models."""

import sqlite3
import subprocess
import sys
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from app.models import Base
from tests.conftest import make_settings, settings_env
from tests.support import ROOT

MSSQL_URL = "mssql+aioodbc://u:p@h/db?driver=ODBC+Driver+18+for+SQL+Server"
POSTGRES_URL = "postgresql+asyncpg://u:p@h/db"
FILTERED_INDEX = (
    "CREATE UNIQUE INDEX uq_jobs_client_idempotency ON jobs (client_id, idempotency_key) "
    "WHERE idempotency_key IS NOT NULL"
)
FINISHED_INDEX = "CREATE INDEX ix_jobs_status_finished ON jobs (status, finished_at) WHERE finished_at IS NOT NULL"
HELD_INDEX = "CREATE INDEX ix_jobs_held ON jobs (held, job_type, created_at) WHERE held IS NOT NULL"
UNIQUE_INDEX = (
    "CREATE UNIQUE INDEX uq_jobs_client_unique ON jobs (client_id, unique_live) WHERE unique_live IS NOT NULL"
)
TABLES = {
    "jobs",
    "job_events",
    "job_dependencies",
    "workflows",
    "outbox",
    "api_keys",
    "webhook_endpoints",
    "client_secrets",
    "deliveries",
    "delivery_attempts",
    "artifacts",
    "schedules",
    "redrives",
    "redrive_items",
    "redrive_events",
    "job_type_pauses",
    "flow_keys",
    "flow_starts",
    "alembic_version",
}

RENDER = """
import sys
from alembic import command
from app.core.migrate import alembic_config
command.upgrade(alembic_config(sys.argv[1]), "head", sql=True)
print("IMPORTED", *sorted(m for m in ("pyodbc", "aioodbc") if m in sys.modules), file=sys.stderr)
"""


def render_offline(url: str) -> tuple[str, str]:
    """`alembic upgrade head --sql` for `url`, in a fresh interpreter; its SQL and the modules it imported."""
    done = subprocess.run(
        [sys.executable, "-c", RENDER, url], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    marker = [line for line in done.stderr.splitlines() if line.startswith("IMPORTED")]
    assert len(marker) == 1, done.stderr
    return done.stdout, marker[0]


def test_the_mssql_rendering_uses_portable_sql_and_never_loads_the_odbc_driver() -> None:
    sql, imported = render_offline(MSSQL_URL)

    assert FILTERED_INDEX in sql
    assert "DATETIMEOFFSET NOT NULL" in sql
    assert "BIGINT NOT NULL IDENTITY" in sql
    assert "payload NVARCHAR(max) NOT NULL" in sql
    assert "body VARBINARY(max) NOT NULL" in sql and "IMAGE" not in sql
    assert "CREATE TABLE schedules" in sql and "active BIT NOT NULL" in sql
    assert "ALTER TABLE jobs ADD run_at DATETIMEOFFSET NULL" in sql
    assert FINISHED_INDEX in sql
    assert "CREATE TABLE job_type_pauses" in sql and "paused_at DATETIMEOFFSET NOT NULL" in sql
    assert "ALTER TABLE jobs ADD held VARCHAR(32) NULL" in sql and HELD_INDEX in sql
    assert "ALTER TABLE jobs ADD unique_live VARCHAR(255) NULL" in sql and UNIQUE_INDEX in sql
    upper = sql.upper()
    for dialect_only in ("SKIP LOCKED", "FOR UPDATE", "NOW()", "CURRENT_TIMESTAMP"):
        assert dialect_only not in upper, dialect_only
    assert imported == "IMPORTED", "rendering SQL must not import pyodbc/aioodbc (they need libodbc)"


def test_the_postgresql_rendering_has_the_filtered_index_and_aware_timestamps() -> None:
    sql, _ = render_offline(POSTGRES_URL)

    assert FILTERED_INDEX in sql and FINISHED_INDEX in sql and HELD_INDEX in sql and UNIQUE_INDEX in sql
    assert "created_at TIMESTAMP WITH TIME ZONE NOT NULL" in sql
    assert "TIMESTAMP WITHOUT TIME ZONE" not in sql
    assert "now()" not in sql.lower()


def run_migrate(database: Path) -> subprocess.CompletedProcess[str]:
    env = settings_env(make_settings(database_url=f"sqlite+aiosqlite:///{database}"))
    return subprocess.run(
        [sys.executable, "-m", "app", "migrate"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def tables_of(database: Path) -> set[str]:
    with sqlite3.connect(database) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def test_migrate_creates_every_table_on_a_fresh_sqlite_file_and_may_run_again(tmp_path: Path) -> None:
    database = tmp_path / "fresh.db"

    first = run_migrate(database)

    assert first.returncode == 0, first.stderr
    assert tables_of(database) == TABLES
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0019",)]

    second = run_migrate(database)

    assert second.returncode == 0, second.stderr
    assert "Traceback" not in second.stderr
    assert tables_of(database) == TABLES


def test_the_models_and_the_migration_agree(tmp_path: Path) -> None:
    database = tmp_path / "compare.db"
    assert run_migrate(database).returncode == 0
    engine = create_engine(f"sqlite:///{database}")
    try:
        with engine.connect() as conn:
            # compare_type=True: UTCDateTime compares cleanly against the reflected DATETIME.
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            differences = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert differences == []
