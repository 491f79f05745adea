"""The noisy-neighbour scenario: what a client's backlog costs another client in the same lane (fair turns,
docs/flow-control.md).

One API and one job worker (C = 32, the default lane). Client A submits N echo jobs through the batch endpoint, 500
a request, as fast as the API takes them; while they drain, client B submits one job a second. Three arms, each
on empty tables: A alone; A with B; A with B and fair turns off (FAIR_SHARE=0, every job goes to the lane as it
is saved: the lane is one FIFO queue). B's figure is each job's submit -> `running` (`started_at` - `created_at`,
both stamped by the service); A's is its drain, N / (last finished_at - first started_at).
"""

import asyncio
import contextlib
from typing import Any

import httpx

from bench.harness import CLIENT_ID, Harness, Server
from bench.procs import until
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget
from bench.stats import percentile

CONSUMERS = 32
BATCH = 500
NEIGHBOUR = "bench-neighbour"
TARGET_P99_MS = 100.0
TARGET_DRAIN = 0.9  # A's drain with B / alone
DRAIN = """
SELECT count(*) AS n, extract(epoch FROM max(finished_at) - min(started_at)) AS seconds FROM jobs
WHERE client_id = $1 AND status = 'succeeded'
"""
WAITS = """
SELECT extract(epoch FROM started_at - created_at) * 1000 AS ms FROM jobs
WHERE client_id = $1 AND started_at IS NOT NULL
"""


async def noisy(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("noisy", job_consumers_default=CONSUMERS)
    alone, _ = await _arm(h, sizes.noisy_jobs, neighbour=False)
    shared, waits = await _arm(h, sizes.noisy_jobs, neighbour=True)
    _, unfair = await _arm(h, sizes.noisy_jobs, neighbour=True, fair_share=0)
    p50, p99 = percentile(waits, 50), percentile(waits, 99)
    off50, off99 = percentile(unfair, 50), percentile(unfair, 99)
    share = ratio(shared, alone, 3)
    h.notes.append(
        f"noisy: A's {sizes.noisy_jobs} echo jobs in batches of {BATCH}; B one job a second while they drain: "
        f"{len(waits)} of B's jobs with fair turns, {len(unfair)} with them off."
    )
    return [
        Row(
            "noisy",
            f"B's submit → running p50 / p99 ms, beside A's {sizes.noisy_jobs} jobs, C = {CONSUMERS}",
            f"{num(p50, 1)} / {num(p99, 1)}",
            f"fair turns off {num(off50, 1)} / {num(off99, 1)}",
            "—",
            f"p99 ≤ {TARGET_P99_MS:g} ms",
            p99 <= TARGET_P99_MS,
        ),
        Row(
            "noisy",
            f"A's drain jobs/s with B, {sizes.noisy_jobs} echo jobs, C = {CONSUMERS}",
            num(shared),
            f"A alone {num(alone)}",
            f"{num(share, 3)} x",
            f"≥ {TARGET_DRAIN} x alone",
            share is not None and share >= TARGET_DRAIN,
        ),
    ]


async def _arm(h: Harness, jobs: int, neighbour: bool, **overrides: Any) -> tuple[float, list[float]]:
    """One arm on empty tables: A's drain jobs/s and B's submit -> running in ms."""
    await h.env.reset()
    api = await h.start_api(name="api-noisy", **overrides)
    worker = await h.start_job_worker(CONSUMERS, name="job-worker-noisy", **overrides)
    a = await h.client_key(api)
    created = await h.call(api, "POST", "/api/v1/api-keys", h.env.admin_key, {"client_id": NEIGHBOUR})
    b = str(created["api_key"])
    stop = asyncio.Event()
    steady = asyncio.create_task(_one_a_second(api, b, stop)) if neighbour else None
    label = "with B" if neighbour else "alone"
    async with h.metered(f"the noisy neighbour ({label}{', fair turns off' if overrides else ''})", {"API": api.proc}):
        await _backlog(api, a, jobs)
        await until(lambda: _drained(h, jobs), drain_budget(jobs), f"noisy drain ({label})", interval=0.2)
    stop.set()
    if steady is not None:
        await steady
    await worker.stop()
    await api.proc.stop()
    row = await h.db.pool.fetchrow(DRAIN, CLIENT_ID)
    rate = float(row["n"]) / max(float(row["seconds"] or 0), 1e-6)
    return rate, [float(r["ms"]) for r in await h.db.pool.fetch(WAITS, NEIGHBOUR)]


async def _backlog(api: Server, key: str, jobs: int) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=api.base, timeout=60, trust_env=False) as client:
        for start in range(0, jobs, BATCH):
            items = [{"job_type": "echo", "payload": {"n": n}} for n in range(start, min(jobs, start + BATCH))]
            answer = await client.post("/api/v1/jobs/batch", json={"jobs": items}, headers=headers)
            answer.raise_for_status()


async def _one_a_second(api: Server, key: str, stop: asyncio.Event) -> None:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=api.base, timeout=30, trust_env=False) as client:
        while not stop.is_set():
            answer = await client.post("/api/v1/jobs", json={"job_type": "echo", "payload": {}}, headers=headers)
            answer.raise_for_status()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


async def _drained(h: Harness, jobs: int) -> bool:
    query = "SELECT count(*) FROM jobs WHERE status = 'succeeded' AND client_id = $1"
    return int(await h.db.pool.fetchval(query, CLIENT_ID)) >= jobs
