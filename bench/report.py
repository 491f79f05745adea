"""The one markdown table the bench prints and writes, the header block above it, and its headline ratios as JSON
beside it (what bench/chart.py draws)."""

import hashlib
import json
import math
import os
import platform
import re
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


def git_dirs(root: Path) -> tuple[Path, Path]:
    """Where HEAD is and where the branches are: `.git` for both, or in a worktree (`.git` a file naming its own
    git directory) that directory and the repository's common one."""
    dot = root / ".git"
    if not dot.is_file():
        return dot, dot
    own = Path(dot.read_text().partition("gitdir:")[2].strip())
    common = own / "commondir"
    return own, (own / common.read_text().strip()).resolve() if common.exists() else own


def code_version(root: Path) -> str:
    """The commit checked out (read from .git, without running git) and a digest of app/ as it is on disk,
    which tells two runs of different working trees apart."""
    commit = "unknown"
    try:
        own, common = git_dirs(root)
        ref = (own / "HEAD").read_text().strip()
        if ref.startswith("ref: "):
            name = ref[5:]
            loose = common / name
            if loose.exists():
                commit = loose.read_text().strip()
            else:
                packed = (common / "packed-refs").read_text().splitlines()
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


@dataclass(frozen=True)
class Headline:
    """One ratio of a row of the table: the row is the first of `scenario` whose figure matches `figure` (a regular
    expression, sizes left open so a --quick table matches too), the ratio the one named `baseline` in its ratio
    cell ("1.05 x Celery" is 1.05 beside Celery). `better` says which side of 1.0 is ours to want."""

    key: str
    label: str
    scenario: str
    figure: str
    baseline: str
    better: str = "higher"  # or "lower": CPU and latency


DRAIN = r"jobs/s draining \d+ .*C = 32"
HEADLINES = (
    Headline("ingest_32", "submits/s, 32 clients, vs bare endpoint (a)", "ingest", r"jobs/s, 32 clients", "(a)"),
    Headline(
        "ingest_p99_32",
        "submit p99, 32 clients, vs (a)",
        "ingest",
        r"p50 / p95 / p99 ms, 32 clients",
        "(a) p99",
        "lower",
    ),
    Headline("ingest_128", "submits/s, 128 clients, vs (a)", "ingest", r"jobs/s, 128 clients", "(a)"),
    Headline("batch", "batch jobs/s vs raw publishes", "ingest", r"jobs/s via POST /api/v1/jobs/batch", "raw publish"),
    Headline("drain_celery", "drain jobs/s vs Celery", "end-to-end", DRAIN, "Celery"),
    Headline("drain_dramatiq", "drain jobs/s vs Dramatiq", "end-to-end", DRAIN, "Dramatiq"),
    Headline("drain_b", "drain vs asyncpg consumer (b)", "end-to-end", DRAIN, "(b)"),
    Headline("drain_a", "drain vs no-op consumer (a)", "end-to-end", DRAIN, "(a)"),
    Headline("cpu_celery", "CPU per job vs Celery", "end-to-end", r"job-worker CPU per job", "Celery", "lower"),
    Headline("cpu_dramatiq", "CPU per job vs Dramatiq", "end-to-end", r"job-worker CPU per job", "Dramatiq", "lower"),
    Headline("webhooks", "deliveries/s vs raw httpx", "webhooks", r"deliveries/s", "raw"),
    Headline(
        "webhook_cpu", "CPU per delivery vs raw httpx", "webhooks", r"webhook-worker CPU per delivery", "raw", "lower"
    ),
)
RATIO = re.compile(r"(\d+(?:\.\d+)?) x ?(.*)")


def ratios_in(cell: str) -> dict[str, str]:
    """The ratios of a ratio cell by baseline: "0.349 x (a) · 1.74 x (b)" -> {"(a)": "0.349", "(b)": "1.74"}."""
    found = {}
    for part in re.split(r" · |; ", cell):
        match = RATIO.fullmatch(part.strip())
        if match:
            found.setdefault(match.group(2).strip(), match.group(1))
    return found


def headline_ratios(rows: list[Row]) -> list[dict[str, object]]:
    """The headline ratios the table holds, in HEADLINES' order, each as the table writes it and as a number; one
    whose row or baseline the table lacks (a failed scenario, the peers of a --quick run) is left out."""
    found = []
    for headline in HEADLINES:
        row = next((r for r in rows if r.scenario == headline.scenario and re.match(headline.figure, r.figure)), None)
        text = ratios_in(row.ratio).get(headline.baseline) if row else None
        if row is None or text is None:
            continue
        found.append(
            {
                "key": headline.key,
                "label": headline.label,
                "ratio": float(text),
                "text": text,
                "better": headline.better,
                "scenario": row.scenario,
                "figure": row.figure,
                "ours": row.ours,
                "baselines": row.baseline,
            }
        )
    return found


def rows_of(document_text: str) -> list[Row]:
    """The rows of a table `table` wrote, read back (a results file written before the ratios were saved as JSON)."""
    rows = []
    for line in document_text.splitlines():
        if not line.startswith("| ") or line == "| " + " | ".join(COLUMNS) + " |":
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != len(COLUMNS):
            continue
        met = {"yes": True, "**no**": False}.get(cells[6])
        rows.append(Row(cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], met))
    return rows


def ratios_path(results: Path) -> Path:
    """Where the headline ratios of a results table are saved: beside it, `latest.md` -> `latest.json`."""
    return results.with_suffix(".json") if results.suffix != ".json" else results.with_suffix(".ratios.json")


def write_ratios(rows: list[Row], results: Path, date: str | None = None) -> Path:
    """Save the headline ratios of `rows`, the table written to `results`, as JSON beside it."""
    path = ratios_path(results)
    body = {
        "table": results.name,
        "date": date or datetime.now(UTC).isoformat(timespec="seconds"),
        "ratios": headline_ratios(rows),
    }
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    return path


def date_of(document_text: str) -> str | None:
    """The `- date:` line of a table's header."""
    match = re.search(r"^- date: (\S+)$", document_text, re.M)
    return match.group(1) if match else None
