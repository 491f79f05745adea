"""The one markdown table the bench prints and writes, and the header block above it."""

import hashlib
import math
import os
import platform
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from bench.env import ROOT

PACKAGES = ("fastapi", "uvicorn", "aio-pika", "sqlalchemy", "asyncpg", "redis", "httpx", "pydantic")
COLUMNS = ("scenario", "figure", "ours", "baseline", "ratio", "target", "met?")


@dataclass(frozen=True)
class Row:
    scenario: str
    figure: str
    ours: str
    baseline: str = "—"
    ratio: str = "—"
    target: str = "—"
    met: bool | None = None  # None: no target for this row

    def cells(self) -> tuple[str, ...]:
        met = "—" if self.met is None else ("yes" if self.met else "**no**")
        return (self.scenario, self.figure, self.ours, self.baseline, self.ratio, self.target, met)


def num(value: float | None, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def ratio(ours: float | None, theirs: float | None, digits: int = 2) -> float | None:
    if not ours or not theirs:
        return None
    return round(ours / theirs, digits)


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row.cells()) + " |")
    return "\n".join(lines)


def rabbitmq_version() -> str:
    try:
        out = subprocess.run(["rabbitmqctl", "version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown (rabbitmqctl not available)"
    return out.stdout.strip() or "unknown"


def versions() -> dict[str, str]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def code_version(root: Path) -> str:
    """The commit checked out (read from .git, without running git) and a digest of app/ as it is on disk,
    which tells two runs of different working trees apart."""
    commit = "unknown"
    head = root / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            name = ref[5:]
            loose = root / ".git" / name
            if loose.exists():
                commit = loose.read_text().strip()
            else:
                packed = (root / ".git" / "packed-refs").read_text().splitlines()
                commit = next((line.split()[0] for line in packed if line.endswith(" " + name)), "unknown")
        else:
            commit = ref
    except OSError:
        pass
    digest = hashlib.sha256()
    for path in sorted((root / "app").rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return f"commit {commit[:12]}, app/ digest {digest.hexdigest()[:12]}"


def header(mode: str, sizes: dict[str, object], settings: dict[str, str], services: dict[str, str]) -> str:
    packages = ", ".join(f"{name} {version}" for name, version in versions().items())
    lines = [
        f"# taskq benchmark ({mode})",
        "",
        f"- date: {datetime.now(UTC).isoformat(timespec='seconds')}",
        f"- machine: {os.cpu_count()} cores, {platform.machine()}, {platform.platform(terse=True)}; "
        "server, workers, load generator, PostgreSQL, RabbitMQ and Redis all share it",
        f"- Python {platform.python_version()}; {packages}",
        f"- service code: {code_version(ROOT)}",
        "- services: " + ", ".join(f"{name} {version}" for name, version in services.items()),
        "- sizes: " + ", ".join(f"{name} {value}" for name, value in sizes.items()),
        "- settings of every bench process (differences from the defaults; a scenario's own below): "
        + ", ".join(f"`{name}={value}`" for name, value in settings.items()),
    ]
    return "\n".join(lines)


def document(head: str, rows: list[Row], notes: list[str]) -> str:
    parts = [head, "", table(rows)]
    if notes:
        parts += ["", "Notes:", "", *(f"- {note}" for note in notes)]
    return "\n".join(parts) + "\n"
