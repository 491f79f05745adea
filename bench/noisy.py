"""The noisy-neighbour scenario: what a client's backlog costs another client in the same lane (fair turns,
docs/flow-control.md).

One API and one job worker (C = 32, the default lane). Client A submits N echo jobs through the batch endpoint, 500
a request, as fast as the API takes them; while they drain, client B submits one job a second. Three arms, each
on empty tables: A alone; A with B; A with B and fair turns off (FAIR_SHARE=0, every job goes to the lane as it
is saved: the lane is one FIFO queue). B's figure is each job's submit -> `running` (`started_at` - `created_at`,
both stamped by the service); A's is its drain, N / (last finished_at - first started_at).

What fair turns add to a submit that holds nothing back (its client has fewer than its share in the lane, the
common case) is one read per flush; two arms of whole-process runs cannot tell it apart, so the scenario also
times it in-process, with the service's own calls against the same PostgreSQL, beside the save of the same flush.
"""

import asyncio
import contextlib
import math
import time
from typing import Any, cast

import httpx

from app.core.broker import Broker
from app.core.database import make_engine
from app.core.lane_shares import LaneShares
from app.schemas.job import JOB_REQUEST
from app.services.fairness import Fairness
from app.services.outbox import Outbox
from app.services.payload_secrets import NO_KEY
from app.services.submit import Draft, insert_drafts, new_drafts
from app.stores import open_stores
from bench.harness import CLIENT_ID, Harness, Server
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget
from bench.stats import percentile

CONSUMERS = 32
BATCH = 500
NEIGHBOUR = "bench-neighbour"
TARGET_P99_MS = 100.0
TARGET_DRAIN = 0.9  # A's drain with B / alone
FLUSH = 32  # single submits of one flush in the in-process timing, each of another client (32 clients fill one)
READ_ROUNDS = 500
SAVE_ROUNDS = 200
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
    unfair_rate, unfair = await _arm(h, sizes.noisy_jobs, neighbour=True, fair_share=0)
    read_us, save_us = await _read_cost(h)
    p50, p99 = percentile(waits, 50), percentile(waits, 99)
    off50, off99 = percentile(unfair, 50), percentile(unfair, 99)
    share = ratio(shared, alone, 3)
    h.notes.append(
        f"noisy: A's {sizes.noisy_jobs} echo jobs in batches of {BATCH}; B one job a second while they drain: "
        f"{len(waits)} of B's jobs with fair turns, {len(unfair)} with them off. A's drain with fair turns off (its "
        f"jobs all in the lane as they are saved): {num(unfair_rate)} jobs/s."
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
        Row(
            "noisy",
            f"fair turns' read of one submit flush ({FLUSH} clients' jobs, nothing held back), µs, in-process",
            num(read_us, 1),
            f"the flush's save {num(save_us, 1)}",
            f"{num(read_us / save_us, 3)} x",
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
        await h.wait_succeeded(jobs, drain_budget(jobs), f"noisy drain ({label})", CLIENT_ID)
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


async def _read_cost(h: Harness) -> tuple[float, float]:
    """µs per flush of `FLUSH` single submits of as many clients, each with a quarter of its share in the lane:
    fair turns' read (`Fairness.admit`: a count for each client), and the save itself (`insert_drafts`, one
    statement on PostgreSQL)."""
    await h.env.reset()
    names = h.env.settings_topology().names
    engine = make_engine(h.env.database_url, 2)
    stores = open_stores(engine, names, 30, NO_KEY)
    shares = LaneShares(cast(Broker, None), names, 32, refresh_seconds=math.inf)  # the floor: never read
    fairness = Fairness(stores.fair, shares, names, cast(Outbox, None))
    request = JOB_REQUEST.validate_python({"job_type": "echo", "payload": {"n": 1}})

    def flush() -> list[Draft]:
        return [draft for n in range(FLUSH) for draft in new_drafts(names, f"bench-read-{n}", [request], None)]

    try:
        for _ in range(8):
            async with stores.jobs.one_transaction() as conn:
                await insert_drafts(stores.jobs, conn, flush())
        drafts = flush()
        started = time.perf_counter()
        for _ in range(READ_ROUNDS):
            admitted, _ = await fairness.admit(drafts)
            assert not any(draft.waits for draft in admitted)
        read = (time.perf_counter() - started) / READ_ROUNDS
        saved = 0.0
        for _ in range(SAVE_ROUNDS):
            batch = flush()
            started = time.perf_counter()
            async with stores.jobs.one_transaction() as conn:
                await insert_drafts(stores.jobs, conn, batch)
            saved += time.perf_counter() - started
    finally:
        await stores.close()
        await engine.dispose()
    return read * 1e6, saved / SAVE_ROUNDS * 1e6
