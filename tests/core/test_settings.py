"""Settings and the command line: documented, validated, lazy at import, and friendly when something is off."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.core.config import Settings
from tests.conftest import make_settings, settings_env
from tests.support import ROOT

CLOSED = "127.0.0.1:1"  # nothing listens on port 1


def base_env() -> dict[str, str]:
    """A clean environment: no settings inherited from whoever runs the tests."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return {**env, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}


IMPORT_ALL = """
import sys
import app.main, app.workers.jobs.worker, app.__main__
print("ODBC", *sorted(m for m in ("pyodbc", "aioodbc") if m in sys.modules))
"""


def test_importing_the_entry_points_connects_to_nothing_and_skips_odbc(tmp_path: Path) -> None:
    env = {
        **base_env(),
        "RABBITMQ_URL": f"amqp://guest:guest@{CLOSED}/",
        "REDIS_URL": f"redis://{CLOSED}/0",
        "DATABASE_URL": f"postgresql+asyncpg://postgres@{CLOSED}/nothing",
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    took = time.monotonic() - started

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ODBC"
    assert took < 15, f"importing took {took:.1f}s: something waits on a connection"


def test_a_malformed_webhook_schedule_is_refused_by_name() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(_env_file=None, webhook_retry_schedule="5,abc")
    assert "WEBHOOK_RETRY_SCHEDULE" in str(caught.value)


def test_the_webhook_schedule_reads_as_seconds() -> None:
    assert make_settings(webhook_retry_schedule="5,300").webhook_retry_delays == [5.0, 300.0]
    assert make_settings(webhook_retry_schedule=" 5, 300 ,").webhook_retry_delays == [5.0, 300.0]


def test_logs_are_json_in_production_only_unless_log_format_says_otherwise() -> None:
    assert make_settings(environment="production", log_format=None).json_logs is True
    assert make_settings(environment="development", log_format=None).json_logs is False
    assert make_settings(environment="production", log_format="text").json_logs is False
    assert make_settings(environment="development", log_format="json").json_logs is True


def run_app(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_bad_commands_and_bad_settings_get_a_sentence_not_a_traceback(tmp_path: Path) -> None:
    unknown = run_app(["worker", "nope"], settings_env(make_settings()), tmp_path)
    assert unknown.returncode == 2
    assert "invalid choice" in unknown.stderr and "Traceback" not in unknown.stderr

    env = {**settings_env(make_settings()), "WEBHOOK_RETRY_SCHEDULE": "5,soon"}
    bad = run_app(["worker", "jobs"], env, tmp_path)
    assert bad.returncode == 2
    assert "Invalid settings" in bad.stderr and "WEBHOOK_RETRY_SCHEDULE" in bad.stderr
    assert "Traceback" not in bad.stderr


def dotenv_keys(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))
    return {name: value for name, value in pairs if name in ("ADMIN_API_KEY", "SECRET_ENCRYPTION_KEY")}


def test_dev_without_rabbitmq_says_how_to_start_it_and_keeps_its_keys(tmp_path: Path) -> None:
    env = {
        **base_env(),
        "RABBITMQ_URL": f"amqp://guest:guest@{CLOSED}/",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'dev.db'}",
        "NAMESPACE": make_settings().namespace,
    }

    first = run_app(["dev"], env, tmp_path)

    assert first.returncode == 1, first.stderr
    assert "RabbitMQ is not answering" in first.stderr
    assert "rabbitmq-server -detached" in first.stderr
    assert "Traceback" not in first.stderr
    keys = dotenv_keys(tmp_path / ".env")
    assert set(keys) == {"ADMIN_API_KEY", "SECRET_ENCRYPTION_KEY"}
    assert all(keys.values())

    second = run_app(["dev"], env, tmp_path)

    assert second.returncode == 1
    assert "Traceback" not in second.stderr
    assert dotenv_keys(tmp_path / ".env") == keys
    assert (tmp_path / ".env").read_text().count("ADMIN_API_KEY=") == 1
