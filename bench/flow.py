"""The flow scenario: what concurrency keys cost a drain, and how soon a freed slot is taken.

Each round drains the same N pre-loaded echo jobs with one job worker (C = 32) three times, taking turns: once
without keys, once spread over 100 concurrency keys of limit 5 (job n has key n mod 100), so at most 500 may run at
once and the limit never binds below C: the figure is the admission's cost, not the limit's; and once without keys
by the service with flow control's code path off (bench/flow_off.py): what the feature costs jobs that do not use
it. Two arms of whole-process drains this short differ by more than that between their own rounds, so the checks
a job without keys pays are also timed in-process, beside the job worker's CPU per job. Then the handoff: 200 jobs
over 10 keys of limit 1, each key's jobs one after another; for each job after a key's first, its `started_at`
minus the previous job's `finished_at` (both stamped by the worker): a slot freed -> the next job of the key
running, through its release, the outbox and its lane.
"""

import time
from collections.abc import Mapping
from statistics import median
from typing import Any, cast

from app.core.messages import JobMessage
from app.services.fairness import Fairness
from app.services.outbox import Outbox
from app.stores.job_types import JobTypeStore
from app.stores.jobs import JobStore
from app.workers.jobs.flow import Admissions
from app.workers.jobs.holds import Holds, PausedTypes, UnknownTypes
from app.workers.jobs.turns import Turns
from bench.harness import CLIENT_ID, Harness
from bench.preload import Fields, preload
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget
from bench.stats import percentile

CONSUMERS = 32
KEYS, LIMIT = 100, 5
HANDOFF_JOBS, HANDOFF_KEYS = 200, 10
TARGET_DRAIN = 0.8  # keyed / keyless
TARGET_UNUSED = 0.95  # keyless / keyless with flow control's code path off
CHECKS = 100_000
TARGET_HANDOFF_MS = 20.0  # p50
PARTS = ("finish", "release", "start")


def _keyed(number: int) -> dict[str, Any]:
    return {"concurrency": {"key": f"k{number % KEYS}", "limit": LIMIT}}


def _serial(number: int) -> dict[str, Any]:
    return {"concurrency": {"key": f"s{number % HANDOFF_KEYS}", "limit": 1}}


ARMS: tuple[tuple[str, Fields | None, str], ...] = (
    ("keyless", None, "app"),
    ("keyed", _keyed, "app"),
    ("off", None, "bench.flow_off"),
)
DRAIN_WINDOW = """
SELECT min(started_at) AS first, max(finished_at) AS last, count(*) AS n FROM jobs
WHERE status = 'succeeded' AND client_id = $1
"""
HANDOFFS = """
SELECT extract(epoch FROM started_at - lag(finished_at) OVER (PARTITION BY concurrency_key ORDER BY started_at))
       * 1000 AS ms
FROM jobs WHERE client_id = $1 AND status = 'succeeded'
"""

# Each handoff in three parts: the run's end to its outcome's commit (its `succeeded` audit row), that to the next
# job's grant (its release), and the grant to the next job running (the outbox, its lane, its claim).
HANDOFF_PARTS = """
WITH j AS (
  SELECT concurrency_key, started_at, finished_at, granted_at,
         (SELECT min(e.created_at) FROM job_events e WHERE e.job_id = j.id AND e.event = 'succeeded') AS recorded
  FROM jobs j WHERE client_id = $1 AND status = 'succeeded'
), o AS (
  SELECT started_at, granted_at, lag(finished_at) OVER w AS ended, lag(recorded) OVER w AS recorded
  FROM j WINDOW w AS (PARTITION BY concurrency_key ORDER BY started_at)
)
SELECT extract(epoch FROM recorded - ended) * 1000 AS finish, extract(epoch FROM granted_at - recorded) * 1000
       AS release, extract(epoch FROM started_at - granted_at) * 1000 AS start
FROM o WHERE ended IS NOT NULL AND granted_at > recorded
"""


async def flow(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("flow", job_consumers_default=CONSUMERS)
    rates: dict[str, list[float]] = {arm: [] for arm, _, _ in ARMS}
    cpu: dict[str, list[float]] = {arm: [] for arm, _, _ in ARMS}
    for round_ in range(sizes.cost_rounds):
        for arm, fields, module in ARMS if round_ % 2 == 0 else reversed(ARMS):
            rate, us = await drain(h, sizes.drain_jobs, f"flow-{arm}", fields, module)
            rates[arm].append(rate)
            cpu[arm].append(us)
    checks, job_us = await _checks_us(), median(cpu["keyless"])
    keyless, keyed, off = median(rates["keyless"]), median(rates["keyed"]), median(rates["off"])
    share, unused = ratio(keyed, keyless, 3), ratio(keyless, off, 3)
    spread = max(max(arm) - min(arm) for arm in rates.values())
    handoffs, parts = await _handoffs(h)
    p50, p99 = percentile(handoffs, 50), percentile(handoffs, 99)
    h.notes.append(
        f"flow: {sizes.cost_rounds} rounds of each arm, taking turns. Rounds, jobs/s: keyless "
        f"{' / '.join(num(r) for r in rates['keyless'])}, keyed {' / '.join(num(r) for r in rates['keyed'])}, "
        f"flow control off {' / '.join(num(r) for r in rates['off'])}. "
        f"Handoff: {len(handoffs)} slots freed over {HANDOFF_KEYS} keys of limit 1; medians, ms: the run's end to "
        f"its outcome committed {num(parts['finish'], 1)}, to the next job's release {num(parts['release'], 1)}, "
        f"to that job running {num(parts['start'], 1)}."
    )
    return [
        Row(
            "flow",
            f"drain jobs/s, {sizes.drain_jobs} echo jobs without keys, C = {CONSUMERS}",
            num(keyless),
            f"flow control's code off {num(off)}",
            f"{num(unused, 3)} x",
            f"≥ {TARGET_UNUSED} x off",
            unused is not None and unused >= TARGET_UNUSED,
        ),
        Row(
            "flow",
            "flow control's checks of a job without keys, µs per job, in-process",
            num(checks, 2),
            f"job-worker CPU per job {num(job_us, 1)} (keyless drain)",
            f"{num(checks / job_us, 4)} x",
            f"≤ {1 - TARGET_UNUSED:g} x the job's CPU",
            checks <= (1 - TARGET_UNUSED) * job_us,
        ),
        Row(
            "flow",
            f"drain jobs/s, {sizes.drain_jobs} echo jobs over {KEYS} concurrency keys of limit {LIMIT}, "
            f"C = {CONSUMERS}",
            num(keyed),
            f"no keys {num(keyless)}",
            f"{num(share, 3)} x; rounds spread {num(spread)}",
            f"≥ {TARGET_DRAIN} x no keys",
            share is not None and share >= TARGET_DRAIN,
        ),
        Row(
            "flow",
            f"a slot freed → the next job of its key running, p50 / p99 ms ({HANDOFF_JOBS} jobs, {HANDOFF_KEYS} keys "
            "of limit 1)",
            f"{num(p50, 1)} / {num(p99, 1)}",
            "—",
            "—",
            f"p50 ≤ {TARGET_HANDOFF_MS:g} ms",
            p50 <= TARGET_HANDOFF_MS,
        ),
    ]


async def drain(
    h: Harness,
    jobs: int,
    arm: str,
    fields: Fields | None = None,
    module: str = "app",
    extra_env: Mapping[str, str] | None = None,
) -> tuple[float, float]:
    """One drain of `jobs` pre-loaded echo jobs by a fresh worker (C = 32; `arm` names it, such as `flow-keyed`):
    its jobs/s, and its CPU per job in µs. The flow and tracing scenarios' arms."""
    names = h.env.settings_topology().names
    await h.env.reset()
    await preload(h.env.database_url, h.broker, names, CLIENT_ID, jobs, fields)
    worker = await h.start_job_worker(CONSUMERS, name=f"job-worker-{arm}", module=module, extra_env=extra_env)
    started = time.perf_counter()
    async with h.metered(f"the drain ({arm})", {"job worker": worker}) as cores, h.profiled(arm, worker):
        await h.wait_succeeded(jobs, drain_budget(jobs), f"drain ({arm})", CLIENT_ID)
    took = time.perf_counter() - started
    await worker.stop()
    row = await h.db.pool.fetchrow(DRAIN_WINDOW, CLIENT_ID)
    return float(row["n"] / max((row["last"] - row["first"]).total_seconds(), 1e-6)), cores[
        "job worker"
    ] * took / jobs * 1e6


async def _checks_us() -> float:
    """µs of flow control's checks of one message of a job without keys, in-process, with the worker's own
    objects: the known-type and paused-type lookups and the key flag (`Holds.held`), and the turn flag
    (`Turns.claimed`)."""
    paused = PausedTypes(cast(JobTypeStore, None), 1.0)
    unknown = UnknownTypes(cast(JobStore, None), cast(Outbox, None), frozenset({"echo"}), 1.0)
    holds = Holds(cast(JobStore, None), paused, cast(Admissions, None), unknown)
    turns = Turns(cast(Fairness, None))
    message = JobMessage("id", "echo", CLIENT_ID, {}, 5, 3, None, None)
    started = time.perf_counter()
    for _ in range(CHECKS):
        assert not await holds.held(message)
        turns.claimed(message)
    return (time.perf_counter() - started) / CHECKS * 1e6


async def _handoffs(h: Harness) -> tuple[list[float], dict[str, float]]:
    """Each handoff's time, and the medians of its three parts (HANDOFF_PARTS)."""
    names = h.env.settings_topology().names
    await h.env.reset()
    await preload(h.env.database_url, h.broker, names, CLIENT_ID, HANDOFF_JOBS, _serial)
    worker = await h.start_job_worker(CONSUMERS, name="job-worker-flow-handoff")
    await h.wait_succeeded(HANDOFF_JOBS, drain_budget(HANDOFF_JOBS), "flow handoff", CLIENT_ID)
    await worker.stop()
    handoffs = [float(row["ms"]) for row in await h.db.pool.fetch(HANDOFFS, CLIENT_ID) if row["ms"] is not None]
    parts = await h.db.pool.fetch(HANDOFF_PARTS, CLIENT_ID)
    return handoffs, {name: median(float(row[name]) for row in parts) if parts else 0.0 for name in PARTS}
