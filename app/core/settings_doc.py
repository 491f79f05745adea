"""`.env.example` and `docs/settings.md`, written from the settings model so neither can miss a setting."""

import textwrap
from pathlib import Path

from pydantic.fields import FieldInfo

from app.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
ENV_EXAMPLE = ROOT / ".env.example"
SETTINGS_PAGE = ROOT / "docs" / "settings.md"
WIDTH = 110

# The heading each group of settings starts with, keyed by its first field; a new field joins the group above it.
SECTIONS = {
    "database_url": "Connections",
    "admin_api_key": "Keys",
    "namespace": "Deployment",
    "rate_limit_per_minute": "API",
    "job_timeout_seconds": "Jobs",
    "job_consumers_critical": "Job worker",
    "outbox_relay_interval": "Outbox relay",
    "webhook_retry_schedule": "Webhooks",
    "retention_delivery_days": "Retention and background loops",
    "scheduler_enabled": "Scheduled and recurring jobs",
    "pause_refresh_seconds": "Flow control",
    "db_pool_size": "Database pool",
    "metrics_port": "Metrics and heartbeats",
    "cpu_pool_size": "CPU-bound jobs and artifacts",
    "failpoints": "Tests only",
}

ENV_HEADER = """\
# Every setting of the service, with its default. Generated from app/core/config.py by
# `python -m app settings-doc`: edit the model's docstrings there, not this file.
# Settings come from the environment and from `.env` in the working directory; the environment wins.
# `make run` writes `.env` itself (the two keys below). Put in `.env` only the lines you want to change;
# do not copy this file whole: an `ADMIN_API_KEY=` line, even empty, stops `make run` from creating a key.
# Tracing is off unless the OpenTelemetry SDK's own variables, set in the environment (not here), name an OTLP
# endpoint: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 (docs/observability.md).
"""

PAGE_HEADER = """\
# Settings

Settings come from the environment and from `.env` in the working directory; the environment wins. Names are
case-insensitive. [`.env.example`](../.env.example) lists the same settings with their defaults.

This page is generated from the settings model (`app/core/config.py`) by `python -m app settings-doc`; a test fails
when it, or `.env.example`, drifts from the model. To add or change a setting, edit the model and run that command.

`make run` sets `EMBEDDED_WORKERS` and `WEBHOOK_ALLOW_PRIVATE_NETWORKS` to `true` unless they are set in the
environment (a value in `.env` does not stop it); it does not write them into `.env`. `DATABASE_URL` takes
PostgreSQL, SQLite or MSSQL: see [databases.md](databases.md).

Tracing is configured by the OpenTelemetry SDK's own `OTEL_*` variables, in the environment (not `.env`), and is
off unless one names an OTLP endpoint: [observability.md](observability.md).
"""


def env_value(field: FieldInfo) -> str:
    """The default as a line of `.env` writes it; empty for a setting that is unset by default."""
    default = field.default
    if default is None:
        return ""
    if isinstance(default, bool):
        return str(default).lower()
    return str(default)


def description(field: FieldInfo) -> str:
    """The field's docstring as one line."""
    return " ".join((field.description or "").split())


def sections() -> list[tuple[str, list[str]]]:
    """The settings in model order, grouped under their headings."""
    groups: list[tuple[str, list[str]]] = []
    for name in Settings.model_fields:
        if name in SECTIONS or not groups:
            groups.append((SECTIONS.get(name, "Settings"), []))
        groups[-1][1].append(name)
    return groups


def env_example() -> str:
    """The text of `.env.example`."""
    parts = [ENV_HEADER]
    for title, names in sections():
        parts.append(f"\n# --- {title} " + "-" * (WIDTH - len(title) - 7) + "\n")
        for name in names:
            field = Settings.model_fields[name]
            comment = textwrap.wrap(description(field), WIDTH - 2, break_on_hyphens=False)
            parts.append("".join(f"# {line}\n" for line in comment) + f"{name.upper()}={env_value(field)}\n")
    return "".join(parts)


def page_default(field: FieldInfo) -> str:
    """The default as the table shows it: in backticks, or *unset*."""
    value = env_value(field)
    return f"`{value}`" if value else "*unset*"


def settings_page() -> str:
    """The text of `docs/settings.md`."""
    parts = [PAGE_HEADER]
    for title, names in sections():
        parts.append(f"\n## {title}\n\n| variable | default | what it does |\n|---|---|---|\n")
        for name in names:
            field = Settings.model_fields[name]
            text = description(field).replace("|", "\\|")
            parts.append(f"| `{name.upper()}` | {page_default(field)} | {text} |\n")
    return "".join(parts)


def outputs() -> dict[Path, str]:
    """Each generated file and the text it should hold."""
    return {ENV_EXAMPLE: env_example(), SETTINGS_PAGE: settings_page()}


def stale() -> list[Path]:
    """The generated files whose text differs from what the model gives."""
    return [path for path, text in outputs().items() if not path.is_file() or path.read_text() != text]


def write() -> list[Path]:
    """Write every generated file that is stale; the ones written."""
    changed = stale()
    for path in changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(outputs()[path])
    return changed
