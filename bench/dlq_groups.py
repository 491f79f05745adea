"""The dlq-groups scenario: `GET /api/v1/dlq/groups` over a big dead-letter queue, beside a plain `GET /api/v1/dlq`.

One API process (no worker) on tables holding `dlq_dead_jobs` dead jobs, written by one INSERT ... SELECT: five
clients (the bench's own key is one of them, a fifth of the jobs), 400 failure groups (5 job types x 4 error
classes x 20 messages, each message with numbers that differ from job to job), skewed so a few groups are big and
most small, dead over the last week. Then `VACUUM ANALYZE jobs`, as autovacuum (off in the bench) would have done,
so PostgreSQL's visibility map lets the GROUP BY read the partial index `ix_jobs_failure_group` alone.

`dlq_calls` rounds, after three warm-up ones; each round times four calls one after the other: the groups' first
page and the plain list's first page (50 items each), with the admin key (every client's jobs) and with the
bench's client key. The rows show p50 and p95 of each; the groups' target is a p95 under 200 ms. The plan of the
groups' statement (EXPLAIN ANALYZE, for both keys) is in the notes, with its scan and heap fetches.
"""

import json
import time
from typing import Any

import httpx
from sqlalchemy.dialects import postgresql

from app.core.failure_groups import group_of
from app.services.dlq_groups import page_query
from app.services.tenancy import Principal
from bench.harness import CLIENT_ID, Harness
from bench.report import Row, num, ratio
from bench.sizes import Sizes
from bench.stats import percentile

TARGET_P95_MS = 200.0
PAGE = 50
WARM_UP = 3
CLIENTS = [CLIENT_ID, "bench-dlq-1", "bench-dlq-2", "bench-dlq-3", "bench-dlq-4"]
JOB_TYPES = ["echo", "flaky", "sleep", "document", "notification"]
ERRORS = [
    ("TransientError", "retries_exhausted"),
    ("PermanentError", "permanent_error"),
    ("JobTimeout", "timeout"),
    ("HTTPStatusError", "retries_exhausted"),
]
SUBJECTS = [
    "inventory",
    "billing",
    "shipping",
    "search",
    "payments",
    "ledger",
    "invoices",
    "reports",
    "email",
    "sms",
    "pricing",
    "catalog",
    "auth",
    "profiles",
    "carts",
    "refunds",
    "exports",
    "imports",
    "thumbnails",
    "geocoding",
]

DEAD_JOBS = """
INSERT INTO jobs (id, client_id, job_type, status, priority, max_retries, attempts, runs, seq, payload, error,
                  dead_reason, failure_group, created_at, updated_at, started_at, finished_at)
SELECT gen_random_uuid()::text, ($2::text[])[1 + g % $3], ($4::text[])[k], 'dead_lettered', 5, 3, 4, 4, 9,
       json_build_object('n', g), json_build_object('type', ($5::text[])[k], 'message',
       replace(replace(($6::text[])[k], '#1', (g % 977)::text), '#2', (g % 13)::text)),
       ($7::text[])[k], ($8::text[])[k], t - interval '1 second', t, t - interval '1 second', t
FROM (
    SELECT g, now() - g * interval '6 seconds' AS t,
           -- skewed: a cube of a number spread evenly over [0, 1) makes a few groups big and most of them small
           1 + floor($9 * power(((g::bigint * 7919) % 100003) / 100003.0, 3))::int AS k
    FROM generate_series(1, $1) AS g
) AS s
"""


def _groups() -> dict[str, list[str]]:
    """The 400 groups as parallel arrays: job type, error class, message template, reason and group id."""
    columns: dict[str, list[str]] = {"types": [], "classes": [], "templates": [], "reasons": [], "ids": []}
    for job_type in JOB_TYPES:
        for error_class, reason in ERRORS:
            for subject in SUBJECTS:
                template = f"{subject} service answered #1 after #2 tries"
                example = {"type": error_class, "message": template.replace("#1", "503").replace("#2", "3")}
                for name, value in zip(
                    columns, (job_type, error_class, template, reason, group_of(job_type, example)), strict=True
                ):
                    columns[name].append(value)
    return columns


async def dlq_groups(h: Harness, sizes: Sizes) -> list[Row]:
    await h.env.reset()
    groups = _groups()
    started = time.monotonic()
    await h.db.pool.execute(
        DEAD_JOBS,
        sizes.dlq_dead_jobs,
        CLIENTS,
        len(CLIENTS),
        groups["types"],
        groups["classes"],
        groups["templates"],
        groups["reasons"],
        groups["ids"],
        len(groups["ids"]),
    )
    await h.db.pool.execute("VACUUM ANALYZE jobs")
    loaded = time.monotonic() - started
    found = await h.db.pool.fetchval("SELECT count(DISTINCT failure_group) FROM jobs WHERE status = 'dead_lettered'")
    api = await h.start_api(name="api-dlq-groups")
    try:
        keys = {"admin": h.env.admin_key, "client": await h.client_key(api)}
        times = await _timed(api.base, keys, sizes.dlq_calls)
    finally:
        await api.proc.stop()
    h.notes.append(
        f"dlq-groups: {sizes.dlq_dead_jobs} dead jobs of {len(CLIENTS)} clients in {found} failure groups, written "
        f"and vacuumed in {loaded:.1f} s; {sizes.dlq_calls} rounds of four calls after {WARM_UP} warm-up rounds."
    )
    for who in keys:
        h.notes.append(f"dlq-groups: the groups' statement for the {who}: {await _plan(h, who)}.")
    return [_row(who, times, sizes) for who in keys]


async def _timed(base: str, keys: dict[str, str], rounds: int) -> dict[tuple[str, str], list[float]]:
    """Milliseconds of each call, by (who, path)."""
    times: dict[tuple[str, str], list[float]] = {}
    async with httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as client:
        for round_ in range(WARM_UP + rounds):
            for who, key in keys.items():
                for path in ("/api/v1/dlq/groups", "/api/v1/dlq"):
                    began = time.perf_counter()
                    answer = await client.get(path, params={"limit": PAGE}, headers={"Authorization": f"Bearer {key}"})
                    took = (time.perf_counter() - began) * 1000
                    if answer.status_code != 200 or len(answer.json()["items"]) != PAGE:
                        raise RuntimeError(f"dlq-groups: {path} as {who} answered {answer.status_code}")
                    if round_ >= WARM_UP:
                        times.setdefault((who, path), []).append(took)
    return times


async def _plan(h: Harness, who: str) -> str:
    """The groups' first page as PostgreSQL runs it: the scan of jobs, its index, its heap fetches and the time."""
    principal = Principal(None, CLIENT_ID, who == "admin")
    statement = page_query(principal, None, PAGE + 1, None)
    sql = str(statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    [plan] = json.loads(await h.db.pool.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}"))
    scans = [node for node in _nodes(plan["Plan"]) if node.get("Relation Name") == "jobs"]
    described = ", ".join(
        f"{'Parallel ' if node.get('Parallel Aware') else ''}{node['Node Type']}"
        f"{' using ' + node['Index Name'] if 'Index Name' in node else ''} ({node['Actual Rows']} rows x "
        f"{node['Actual Loops']} loops, heap fetches {node.get('Heap Fetches', 'n/a')})"
        for node in scans
    )
    return f"{described}; {plan['Execution Time']:.1f} ms in the database"


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(found for child in node.get("Plans", []) for found in _nodes(child))]


def _row(who: str, times: dict[tuple[str, str], list[float]], sizes: Sizes) -> Row:
    grouped, plain = times[(who, "/api/v1/dlq/groups")], times[(who, "/api/v1/dlq")]
    p95 = percentile(grouped, 95)
    whose = "every client's (admin key)" if who == "admin" else f"one client's ({len(CLIENTS)} clients)"
    return Row(
        "dlq-groups",
        f"GET /api/v1/dlq/groups, first {PAGE} groups of {sizes.dlq_dead_jobs:,} dead jobs, {whose}, p50 / p95 ms",
        f"{num(percentile(grouped, 50))} / {num(p95)}",
        f"GET /api/v1/dlq (first {PAGE}) {num(percentile(plain, 50))} / {num(percentile(plain, 95))}",
        f"{num(ratio(percentile(grouped, 50), percentile(plain, 50)), 2)} x (p50)",
        target=f"p95 < {TARGET_P95_MS:g} ms",
        met=p95 < TARGET_P95_MS,
    )
