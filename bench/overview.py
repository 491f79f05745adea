"""The overview scenario: `GET /api/v1/overview` over a big jobs table. It fills PostgreSQL with N jobs in one
INSERT ... SELECT (10 clients, 6 types; most succeeded over the last week, an hour of finishes, dead, cancelled
and live jobs, and an hour of retried attempts in the audit trail), runs VACUUM ANALYZE (this machine's server
runs without autovacuum, which keeps the visibility map an index-only scan needs), then times the overview as the
admin and as one client, p50/p95 over `overview_calls` calls each after a first call: cold
(OVERVIEW_CACHE_SECONDS=0, every call reads the database; the counts by type, kept 30 s and recounted in the
background, come from the first call) and warm (as shipped, 5 s: the calls are served from the process's copy);
the first call, which reads everything, on its own row; beside `GET /api/v1/dlq/stats` and `GET /health` timed
in the same process and run.
"""

import time
from typing import Any

import httpx

from bench.harness import Harness, Server
from bench.report import Row, num
from bench.sizes import Sizes
from bench.stats import percentile

CLIENTS = 10
CLIENT = "bench-ov-3"  # the client whose overview is timed: a tenth of the jobs
TARGET_MS = 250.0  # an admin overview read from the database at p95
ARMS = {
    "cold": "answer not kept (OVERVIEW_CACHE_SECONDS=0: every call reads the database)",
    "warm": "as shipped (an answer kept 5 s)",
}

FILL = """
INSERT INTO jobs (id, client_id, job_type, status, priority, max_retries, attempts, runs, seq, payload,
                  dead_reason, created_at, updated_at, started_at, finished_at, next_attempt_at)
SELECT gen_random_uuid()::text, 'bench-ov-' || ((g / 10) % 10), (ARRAY['echo','document','image','notification','sleep',
       'report'])[1 + (g * 7) % 6], s.status, 5, 3, 1, 1, 3, '{"n": 1}'::json,
       CASE WHEN s.status = 'dead_lettered' THEN 'exhausted' END,
       s.finished - interval '1 second' * (1 + g % 5), s.finished,
       CASE WHEN s.status IN ('succeeded', 'dead_lettered', 'running')
            THEN s.finished - interval '1 millisecond' * (5 + g % 400) END,
       CASE WHEN s.status IN ('succeeded', 'dead_lettered', 'cancelled') THEN s.finished END,
       CASE WHEN s.status IN ('retrying', 'scheduled') THEN s.finished + interval '1 hour' END
FROM generate_series(1, $1) AS g,
LATERAL (SELECT
    CASE WHEN g % 1000 < 900 THEN 'succeeded' WHEN g % 1000 < 930 THEN 'dead_lettered'
         WHEN g % 1000 < 950 THEN 'cancelled'
         WHEN g % 1000 < 970 THEN 'queued' WHEN g % 1000 < 980 THEN 'scheduled' WHEN g % 1000 < 990 THEN 'retrying'
         WHEN g % 1000 < 995 THEN 'running' ELSE 'pending' END AS status,
    -- a tenth of the finished jobs in the last hour, the rest over the week before
    CASE WHEN g % 10 = 0 THEN now() - interval '1 millisecond' * ((g::bigint * 7919) % 3600000)
         ELSE now() - interval '1 hour' - interval '1 millisecond' * ((g::bigint * 7919) % 604800000) END AS finished
) AS s
"""
RETRIES = """
INSERT INTO job_events (job_id, event, detail, created_at)
SELECT id, 'retrying', '{}'::json, updated_at - interval '1 minute' FROM jobs
WHERE status = 'retrying' AND updated_at > now() - interval '59 minutes'
"""


async def overview(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("overview", overview_cache_seconds="0 (cold) and 5 (warm)")
    await h.env.reset()
    started = time.monotonic()
    await h.db.pool.execute(FILL, sizes.overview_jobs, timeout=1800)
    await h.db.pool.execute(RETRIES)
    await h.db.pool.execute("VACUUM ANALYZE jobs", timeout=1800)
    await h.db.pool.execute("VACUUM ANALYZE job_events")
    filled = time.monotonic() - started
    rows: list[Row] = []
    for arm, seconds in (("cold", 0), ("warm", 5)):
        api = await h.start_api(f"api-overview-{arm}", overview_cache_seconds=seconds)
        try:
            rows += await _arm(h, api, arm, sizes)
        finally:
            await api.proc.stop()
    h.notes.append(f"overview: {sizes.overview_jobs} jobs written and vacuumed in {filled:.0f} s; {await _plan(h)}")
    await h.env.reset()
    return rows


async def _arm(h: Harness, api: Server, arm: str, sizes: Sizes) -> list[Row]:
    admin = h.env.admin_key
    created = await h.call(api, "POST", "/api/v1/api-keys", admin, {"client_id": CLIENT})
    client = str(created["api_key"])
    times = {
        "admin": await _timed(api, "/api/v1/overview", admin, sizes.overview_calls),
        "client": await _timed(api, "/api/v1/overview", client, sizes.overview_calls),
        "dlq": await _timed(api, "/api/v1/dlq/stats", admin, sizes.overview_calls),
        "health": await _timed(api, "/health", admin, sizes.overview_calls),
    }
    # every arm's first call of each caller reads everything, the by-type counts included; the others are the figure
    first = {who: values[0] for who, values in times.items()}
    times = {who: values[1:] or values for who, values in times.items()}
    baseline = f"dlq/stats {_p(times['dlq'], 50)} / {_p(times['dlq'], 95)}; health {_p(times['health'], 50)}"
    rows = []
    if arm == "cold":
        rows.append(
            Row(
                "overview",
                f"GET /api/v1/overview, first call (nothing kept), ms, admin / client, {sizes.overview_jobs} jobs",
                f"{num(first['admin'])} / {num(first['client'])}",
                f"dlq/stats first call {num(first['dlq'])}",
            )
        )
    for who in ("admin", "client"):
        p95 = percentile(times[who], 95)
        target = arm == "cold" and who == "admin"
        rows.append(
            Row(
                "overview",
                f"GET /api/v1/overview as {who}, {ARMS[arm]}, ms p50 / p95 over {len(times[who])} calls, "
                f"{sizes.overview_jobs} jobs",
                f"{_p(times[who], 50)} / {_p(times[who], 95)}",
                baseline,
                f"{num(p95 / max(percentile(times['dlq'], 95), 1e-6), 2)} x dlq/stats p95",
                f"p95 ≤ {TARGET_MS:.0f} ms" if target else "—",
                p95 <= TARGET_MS if target else None,
            )
        )
    return rows


async def _timed(api: Server, path: str, key: str, calls: int) -> list[float]:
    """Milliseconds of each of `calls` sequential calls on one connection."""
    times = []
    async with httpx.AsyncClient(base_url=api.base, timeout=60, trust_env=False) as http:
        for _ in range(calls):
            start = time.perf_counter()
            answer = await http.get(path, headers={"Authorization": f"Bearer {key}"})
            times.append((time.perf_counter() - start) * 1000)
            if answer.status_code != 200:
                raise RuntimeError(f"GET {path}: {answer.status_code} {answer.text[:300]}")
    return times


def _p(values: list[float], q: float) -> str:
    return num(percentile(values, q))


async def _plan(h: Harness) -> str:
    """How PostgreSQL reads the admin's counts, the heaviest statement, and how long it takes alone."""
    plan: list[Any] = await h.db.pool.fetch(
        "EXPLAIN (ANALYZE, BUFFERS) SELECT status, job_type, count(*) FROM jobs GROUP BY status, job_type"
    )
    lines = [str(row[0]).strip() for row in plan]
    scans = [line for line in lines if "Scan" in line]
    total = next((line for line in lines if line.startswith("Execution Time")), "")
    return f"the admin's counts by status and type: {scans[0] if scans else lines[0]}; {total}."
