"""The progress scenario: what progress reports cost a drain (docs/progress.md).

Each round drains the same N pre-loaded `sleep` jobs of 0.05 s with one job worker (C = 32) twice, taking turns:
once without progress, once with every job reporting every 10 ms (`"progress": true`, by the service with the
report interval cut from 0.5 s to 10 ms: bench/progress_reporting.py), about five reports a job. The worker keeps
each run's latest report and writes at most one a second per job, so a job this short is written once (its first
report, grouped with other jobs' into one statement, and its event) and its last report rides with its outcome.
"""

import time
from statistics import median
from typing import Any

from bench.flow import DRAIN_WINDOW
from bench.harness import CLIENT_ID, Harness
from bench.preload import Fields, preload
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget

CONSUMERS = 32
SECONDS = 0.05
TARGET = 0.9  # reporting / plain
# A job with no report holds JSON null (as `result` does), not SQL NULL.
PROGRESSED = "SELECT count(*) FROM jobs WHERE client_id = $1 AND json_typeof(progress) = 'object'"


def _plain(number: int) -> dict[str, Any]:
    return {"job_type": "sleep", "payload": {"seconds": SECONDS}}


def _reporting(number: int) -> dict[str, Any]:
    return {"job_type": "sleep", "payload": {"seconds": SECONDS, "progress": True}}


ARMS: tuple[tuple[str, Fields, str], ...] = (
    ("plain", _plain, "app"),
    ("reporting", _reporting, "bench.progress_reporting"),
)


async def progress(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("progress", job_consumers_default=CONSUMERS)
    rates = await _rounds(h, sizes)
    plain, reporting = median(rates["plain"]), median(rates["reporting"])
    share = ratio(reporting, plain, 3)
    spread = max(max(arm) - min(arm) for arm in rates.values())
    shown = {arm: " / ".join(num(rate) for rate in arm_rates) for arm, arm_rates in rates.items()}
    h.notes.append(
        f"progress: {sizes.cost_rounds} rounds of each arm, taking turns. Rounds, jobs/s: plain {shown['plain']}, "
        f"reporting every 10 ms {shown['reporting']}."
    )
    return [
        Row(
            "progress",
            f"drain jobs/s, {sizes.drain_jobs} sleep jobs of {SECONDS:g} s reporting every 10 ms, C = {CONSUMERS}",
            num(reporting),
            f"no progress {num(plain)}",
            f"{num(share, 3)} x; rounds spread {num(spread)}",
            f"≥ {TARGET} x no progress",
            share is not None and share >= TARGET,
        )
    ]


async def _rounds(h: Harness, sizes: Sizes) -> dict[str, list[float]]:
    """Each arm's drain rates, the arms taking turns (the first arm first in even rounds)."""
    rates: dict[str, list[float]] = {arm: [] for arm, _, _ in ARMS}
    for round_ in range(sizes.cost_rounds):
        turns = ARMS if round_ % 2 == 0 else tuple(reversed(ARMS))
        for arm, fields, module in turns:
            rates[arm].append(await _drain(h, sizes.drain_jobs, arm, fields, module))
    return rates


async def _drain(h: Harness, jobs: int, arm: str, fields: Fields, module: str) -> float:
    """One drain of `jobs` pre-loaded sleep jobs by a fresh worker: its jobs/s."""
    names = h.env.settings_topology().names
    await h.env.reset()
    await preload(h.env.database_url, h.broker, names, CLIENT_ID, jobs, fields)
    worker = await h.start_job_worker(CONSUMERS, name=f"job-worker-progress-{arm}", module=module)
    started = time.perf_counter()
    async with h.metered(f"the drain ({arm})", {"job worker": worker}):
        await h.wait_succeeded(jobs, drain_budget(jobs), f"progress drain ({arm})", CLIENT_ID)
    took = time.perf_counter() - started
    await worker.stop()
    progressed = await h.db.pool.fetchval(PROGRESSED, CLIENT_ID)
    expected = jobs if arm == "reporting" else 0
    assert progressed == expected, f"{arm}: {progressed} jobs show progress, not {expected}"
    row = await h.db.pool.fetchrow(DRAIN_WINDOW, CLIENT_ID)
    window = (row["last"] - row["first"]).total_seconds()
    return float(row["n"] / max(window, 1e-6)) if window > 0 else jobs / took
