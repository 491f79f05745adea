"""The retention scenario: what pruning finished jobs costs a drain. Each round loads the same N jobs that finished
40 days ago (with four audit rows each) beside the drain's pre-loaded echo jobs, and starts one job worker
(C = 32): with `JOB_RETENTION_DAYS=0` ("kept", nothing is pruned) or as shipped, 30 ("pruning": the worker's own
retention loop deletes the old jobs in batches while its consumers drain). The two arms take turns, so a drift
of the machine's speed falls on both alike; each figure is the median of its rounds. Both arms keep every other
kind of row (`RETENTION_JOB_DAYS` far out), so the only difference is the pruning of jobs.
"""

from statistics import median

from bench.flow import DRAIN_WINDOW
from bench.harness import CLIENT_ID, Harness
from bench.preload import preload
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget

CONSUMERS = 32
OLD_CLIENT = "bench-old"
KEPT = 0  # JOB_RETENTION_DAYS of the arm that prunes nothing
FAR = 36500  # RETENTION_JOB_DAYS of both arms: the audit rows of finished jobs are not the figure here
ARMS = (("kept", KEPT), ("pruning", 30))
TARGET = 0.9  # pruning / kept: the drain keeps at least this share of its rate

OLD_JOBS = """
INSERT INTO jobs (id, client_id, job_type, status, priority, max_retries, attempts, runs, seq, payload, result,
                  created_at, updated_at, started_at, finished_at)
SELECT gen_random_uuid()::text, $2, 'echo', 'succeeded', 5, 3, 1, 1, 3, '{"n": 1}'::json, '{"n": 1}'::json,
       t, t, t, t
FROM (SELECT now() - interval '40 days' - g * interval '1 millisecond' AS t FROM generate_series(1, $1) AS g) AS s
"""
OLD_EVENTS = """
INSERT INTO job_events (job_id, event, detail, created_at)
SELECT j.id, e.event, '{}'::json, j.finished_at
FROM jobs AS j CROSS JOIN (VALUES ('created'), ('queued'), ('running'), ('succeeded')) AS e(event)
WHERE j.client_id = $1
"""


async def retention(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("retention", job_consumers_default=CONSUMERS, retention_job_days=FAR)
    rates: dict[str, list[float]] = {"kept": [], "pruning": []}
    pruned: list[int] = []
    for round_ in range(sizes.prune_rounds):
        for arm, days in ARMS if round_ % 2 == 0 else reversed(ARMS):
            rate, gone = await _drain_beside_old_jobs(h, sizes, arm, days)
            rates[arm].append(rate)
            if days != KEPT:
                pruned.append(gone)
    kept, pruning = median(rates["kept"]), median(rates["pruning"])
    kept_share = ratio(pruning, kept, 3)
    spread = max(max(arm) - min(arm) for arm in rates.values())
    h.notes.append(
        f"retention: {sizes.prune_rounds} rounds of each arm, taking turns; {sizes.prune_jobs} jobs finished 40 days "
        f"ago beside each drain of {sizes.drain_jobs}. Rounds, jobs/s: kept {_all(rates['kept'])}, pruning "
        f"{_all(rates['pruning'])}; old jobs deleted while the drain ran: {', '.join(map(str, pruned))}."
    )
    return [
        Row(
            "retention",
            f"drain jobs/s, {sizes.drain_jobs} echo jobs, C = {CONSUMERS}, while {sizes.prune_jobs} finished jobs "
            "are pruned",
            num(pruning),
            f"nothing pruned {num(kept)}",
            f"{num(kept_share, 3)} x; pruning - kept {num(pruning - kept)}, rounds spread {num(spread)}",
            f"≥ {TARGET} x (under 10 % slower)",
            kept_share is not None and kept_share >= TARGET,
        ),
        Row(
            "retention",
            "finished jobs deleted while the drain ran (median of rounds)",
            num(median(pruned), 0),
            f"of {sizes.prune_jobs}",
        ),
    ]


async def _drain_beside_old_jobs(h: Harness, sizes: Sizes, arm: str, days: int) -> tuple[float, int]:
    """One drain beside the old jobs, by a worker with JOB_RETENTION_DAYS=`days`: its jobs/s, and how many old
    jobs were deleted by the time the last job of the drain succeeded."""
    names = h.env.settings_topology().names
    await h.env.reset()
    await h.db.pool.execute(OLD_JOBS, sizes.prune_jobs, OLD_CLIENT)
    await h.db.pool.execute(OLD_EVENTS, OLD_CLIENT)
    await h.db.pool.execute("ANALYZE jobs, job_events")
    await preload(h.env.database_url, h.broker, names, CLIENT_ID, sizes.drain_jobs)
    worker = await h.start_job_worker(
        CONSUMERS, name=f"job-worker-retention-{arm}", job_retention_days=days, retention_job_days=FAR
    )
    async with h.metered(f"the drain beside old jobs ({arm})", {"job worker": worker}):
        # the drain's own jobs: the old ones are `succeeded` too
        what = f"drain of {sizes.drain_jobs} jobs beside old ones ({arm})"
        await h.wait_succeeded(sizes.drain_jobs, drain_budget(sizes.drain_jobs), what, CLIENT_ID)
    left = int(await h.db.pool.fetchval("SELECT count(*) FROM jobs WHERE client_id = $1", OLD_CLIENT))
    await worker.stop()
    row = await h.db.pool.fetchrow(DRAIN_WINDOW, CLIENT_ID)
    rate = row["n"] / max((row["last"] - row["first"]).total_seconds(), 1e-6)
    return rate, sizes.prune_jobs - left


def _all(rates: list[float]) -> str:
    return " / ".join(num(rate) for rate in rates)
