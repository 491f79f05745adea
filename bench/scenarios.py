"""The four scenarios. Each starts what it needs, measures, stops what it started and returns table rows.

- ingest: `POST /api/v1/jobs` at 1, 8, 32 and 128 clients against the service's API (no worker), then the
  same load against the bare baseline API.
- end-to-end: N queued jobs drained by one job worker with C consumers, beside raw consumers (a: no-op,
  b: claim + finish by hand with asyncpg); then submit -> succeeded latency at a fixed moderate rate.
- webhooks: N job events delivered by one webhook worker to a signature-verifying receiver, beside raw httpx
  POSTs at the same concurrency; then submit -> callback latency at 100 jobs/s.
- soak: many echo jobs through API and worker; resident memory at start, at the checkpoint and at the end;
  lost and duplicated jobs.
"""

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from app.core.names import Lane
from bench.env import free_port
from bench.harness import CLIENT_ID, Harness, Server, read_ids, records, reset_receiver
from bench.preload import preload
from bench.procs import Proc, until, wait_http_ready
from bench.report import Row, num, ratio
from bench.stats import percentile

INGEST_LEVELS = (1, 8, 32, 128)
INGEST_TARGET_LEVEL = 32
DRAIN_CONSUMERS = (1, 8, 32)
DRAIN_TARGET_CONSUMERS = 32
LATENCY_CONSUMERS = 8
HOOK_JOB_CONSUMERS = 8
SOAK_CONSUMERS = 8
SOAK_CLIENTS = 32


@dataclass(frozen=True)
class Sizes:
    ingest_requests: int  # per concurrency level, after the warm-up
    ingest_warmup: int
    drain_jobs: int
    latency_rate: float  # jobs/s for end-to-end latency
    latency_jobs: int
    hook_jobs: int  # deliveries drained for deliveries/s
    hook_rate: float  # jobs/s for submit -> callback latency
    hook_latency_jobs: int
    soak_jobs: int
    soak_checkpoint: int

    def shown(self) -> dict[str, object]:
        return asdict(self)


FULL = Sizes(
    ingest_requests=2000,
    ingest_warmup=100,
    drain_jobs=3000,
    latency_rate=20,
    latency_jobs=600,
    hook_jobs=1000,
    hook_rate=100,
    hook_latency_jobs=2000,
    soak_jobs=50_000,
    soak_checkpoint=10_000,
)
QUICK = Sizes(
    ingest_requests=100,
    ingest_warmup=10,
    drain_jobs=300,
    latency_rate=20,
    latency_jobs=40,
    hook_jobs=100,
    hook_rate=100,
    hook_latency_jobs=100,
    soak_jobs=1000,
    soak_checkpoint=200,
)


def _drain_budget(jobs: int) -> float:
    """Seconds a drain may take before the scenario gives up (at 5 jobs/s at worst, and 2 minutes at least)."""
    return max(120.0, jobs / 5)


def _ms3(stats: dict[str, float]) -> str:
    return f"{num(stats.get('p50'))} / {num(stats.get('p95'))} / {num(stats.get('p99'))}"


def _errors(result: dict[str, Any]) -> str:
    odd = {code: n for code, n in result["statuses"].items() if code != "201"}
    text = str(result["errors"])
    return f"{text} ({', '.join(f'{n}x{code}' for code, n in odd.items())})" if odd else text


# -- ingest -------------------------------------------------------------------------------------------------
async def ingest(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("ingest", job_workers="none: the API alone")
    await h.env.reset()
    requests, warmup = sizes.ingest_requests, sizes.ingest_warmup
    api = await h.start_api()
    key = await h.client_key(api)
    ours = {c: await _ingest_level(h, api, "API", key, c, requests, warmup) for c in INGEST_LEVELS}
    await api.proc.stop()
    base = await h.start_baseline_api()
    theirs = {c: await _ingest_level(h, base, "baseline API", "none", c, requests, warmup) for c in INGEST_LEVELS}
    await base.proc.stop()

    rows = []
    for clients in INGEST_LEVELS:
        mine, base_result = ours[clients], theirs[clients]
        at_target = clients == INGEST_TARGET_LEVEL
        speed = ratio(mine["per_s"], base_result["per_s"])
        rows.append(
            Row(
                "ingest",
                f"jobs/s, {clients} client{'s' if clients > 1 else ''}",
                num(mine["per_s"]),
                f"(a) {num(base_result['per_s'])}",
                f"{num(speed, 2)} x (a)",
                "≥ 0.7 x (a)" if at_target else "—",
                (speed is not None and speed >= 0.7) if at_target else None,
            )
        )
        p99 = mine["latency_ms"].get("p99")
        rows.append(
            Row(
                "ingest",
                f"p50 / p95 / p99 ms, {clients} client{'s' if clients > 1 else ''}",
                _ms3(mine["latency_ms"]),
                f"(a) {_ms3(base_result['latency_ms'])}",
                f"{num(ratio(p99, base_result['latency_ms'].get('p99')), 2)} x (a) p99",
                "p99 ≤ 50 ms" if at_target else "—",
                (p99 is not None and p99 <= 50) if at_target else None,
            )
        )
    target = ours[INGEST_TARGET_LEVEL]["errors"]
    rows.append(
        Row(
            "ingest",
            "errors (non-2xx or no answer), " + " / ".join(map(str, INGEST_LEVELS)) + " clients",
            " / ".join(_errors(ours[c]) for c in INGEST_LEVELS),
            "(a) " + " / ".join(_errors(theirs[c]) for c in INGEST_LEVELS),
            "—",
            f"0 at {INGEST_TARGET_LEVEL} clients",
            target == 0,
        )
    )
    h.notes.append(
        f"ingest: {sizes.ingest_requests} measured requests per level after {sizes.ingest_warmup} warm-up "
        "requests, closed loop, one keep-alive connection per client; latency is the client's round trip."
    )
    return rows


async def _ingest_level(
    h: Harness, server: Server, role: str, key: str, clients: int, requests: int, warmup: int
) -> dict[str, Any]:
    """One concurrency level; at the target level the server's CPU is metered (and profiled with --profile)."""
    name = f"loadgen-{'base-' if role != 'API' else ''}c{clients}"
    if clients != INGEST_TARGET_LEVEL:
        return await h.loadgen(server.jobs_url, key, concurrency=clients, requests=requests, warmup=warmup, name=name)
    profile: contextlib.AbstractAsyncContextManager[Any] = (
        h.profiled(f"ingest-api-c{clients}", server.proc) if role == "API" else contextlib.nullcontext()
    )
    async with h.metered(f"ingest at {clients} clients ({role})", {role: server.proc}) as cores, profile:
        result = await h.loadgen(server.jobs_url, key, concurrency=clients, requests=requests, warmup=warmup, name=name)
    if result["per_s"]:
        per_job = cores[role] * 1000 / result["per_s"]
        h.notes.append(f"{role} CPU per accepted submit at {clients} clients: {per_job:.1f} ms.")
    return result


# -- end-to-end ---------------------------------------------------------------------------------------------
async def end_to_end(h: Harness, sizes: Sizes) -> list[Row]:
    names = h.env.settings_topology().names
    lane = names.lane_queue(Lane.DEFAULT)
    jobs = sizes.drain_jobs
    budget = _drain_budget(jobs)
    pool = 2 * h.env.settings().db_pool_size  # the service's engine: pool size + as many again as overflow
    h.record_settings("end-to-end", job_consumers_default="C", job_consumers_critical=0, job_consumers_bulk=0)
    rows = []
    for consumers in DRAIN_CONSUMERS:
        await h.env.reset()
        await preload(h.env.database_url, h.broker, names, CLIENT_ID, jobs)
        worker = await h.start_job_worker(consumers, name=f"job-worker-c{consumers}")
        profile: contextlib.AbstractAsyncContextManager[Any] = (
            h.profiled(f"drain-worker-c{consumers}", worker)
            if consumers == DRAIN_TARGET_CONSUMERS
            else contextlib.nullcontext()
        )
        async with profile, h.metered(f"the drain with C = {consumers}", {"job worker": worker}) as cores:
            await h.wait_succeeded(jobs, budget, f"drain of {jobs} jobs with C={consumers}")
        await worker.stop()
        first, last, done = await h.db.drain_window()
        ours = done / max((last - first).total_seconds(), 1e-6)
        per_job = cores["job worker"] * 1000 / ours
        h.notes.append(f"job worker CPU per job in the drain with C = {consumers}: {per_job:.1f} ms.")

        common = ["--queue", lane, "--consumers", str(consumers), "--expect", str(jobs), "--max-seconds", str(budget)]
        await h.env.reset()
        await preload(h.env.database_url, h.broker, names, CLIENT_ID, jobs)
        noop = await h.tool(
            f"consumers-noop-c{consumers}", "bench.baseline_consumers", ["--mode", "noop", *common], within=budget + 60
        )
        await h.env.reset()
        await preload(h.env.database_url, h.broker, names, CLIENT_ID, jobs)
        by_hand = await h.tool(
            f"consumers-asyncpg-c{consumers}",
            "bench.baseline_consumers",
            [
                "--mode",
                "asyncpg",
                "--dsn",
                h.env.dsn,
                "--pool-size",
                str(pool),
                "--events-exchange",
                names.events_exchange,
                *common,
            ],
            within=budget + 60,
        )
        for result in (noop, by_hand):
            if not result["complete"]:
                raise RuntimeError(f"baseline {result['mode']} drained {result['count']} of {jobs}")
        if await h.db.succeeded() != jobs:
            raise RuntimeError("baseline (b) did not leave every job succeeded")
        vs_a, vs_b = ratio(ours, noop["per_s"], 3), ratio(ours, by_hand["per_s"])
        at_target = consumers == DRAIN_TARGET_CONSUMERS
        rows.append(
            Row(
                "end-to-end",
                f"jobs/s draining {jobs} queued echo jobs, 1 worker, C = {consumers}",
                num(ours),
                f"(a) {num(noop['per_s'])} · (b) {num(by_hand['per_s'])}",
                f"{num(vs_a, 3)} x (a) · {num(vs_b, 2)} x (b)",
                "≥ 0.7 x (b); ratio to (a) reported" if at_target else "—",
                (vs_b is not None and vs_b >= 0.7) if at_target else None,
            )
        )
    rows.append(await _latency_at_rate(h, sizes))
    h.notes.append(
        f"end-to-end: each drain pre-loads {jobs} queued echo jobs with the service's own tables and message code "
        "(bench/preload.py) while no consumer runs, then starts one `python -m app worker jobs`; its jobs/s is "
        "N / (last finished_at - first started_at) from the database. (a) and (b) time the first message to the "
        f"N-th ack in their own process; (b) uses an asyncpg pool of {pool} (the service engine's pool + overflow)."
    )
    return rows


async def _latency_at_rate(h: Harness, sizes: Sizes) -> Row:
    await h.env.reset()
    api = await h.start_api()
    key = await h.client_key(api)
    worker = await h.start_job_worker(LATENCY_CONSUMERS, name="job-worker-latency")
    ids = h.work / "e2e-latency.ids"
    load = await h.loadgen(
        api.jobs_url,
        key,
        concurrency=8,
        requests=sizes.latency_jobs,
        rate=sizes.latency_rate,
        ids_out=ids,
        name="loadgen-e2e-latency",
    )
    sent = list(read_ids(ids))

    async def all_done() -> bool:
        return await h.db.succeeded_of(sent) >= len(sent)

    await until(all_done, _drain_budget(len(sent)), "end-to-end latency jobs", interval=0.2)
    latencies = await h.db.latencies_ms(sent)
    await worker.stop()
    await api.proc.stop()
    achieved = load["per_s"]
    return Row(
        "end-to-end",
        f"submit→succeeded p50 / p99 ms at {num(sizes.latency_rate, 0)} jobs/s offered "
        f"({num(achieved)} accepted/s, C = {LATENCY_CONSUMERS}; DB finished_at - created_at)",
        f"{num(percentile(latencies, 50))} / {num(percentile(latencies, 99))}",
    )


# -- webhooks -----------------------------------------------------------------------------------------------
@dataclass
class Hooks:
    """What the webhook scenario runs: API, receiver, job worker, and (later) the webhook worker."""

    api: Server
    key: str
    endpoint: dict[str, Any]
    receiver: Server
    worker: Proc
    hooks: Proc | None = None
    rejected: int = 0


async def webhooks(h: Harness, sizes: Sizes) -> list[Row]:
    settings = h.env.settings()
    in_flight = min(settings.webhook_consumers, settings.webhook_max_in_flight_per_endpoint)
    h.record_settings(
        "webhooks", job_consumers_default=HOOK_JOB_CONSUMERS, job_consumers_critical=0, job_consumers_bulk=0
    )
    await h.env.reset()
    run = await _hooks_setup(h)
    try:
        ours, gap = await _delivery_drain(h, run, sizes.hook_jobs)
        await reset_receiver(run.receiver)
        raw = await h.tool(
            "raw-webhooks",
            "bench.raw_webhooks",
            ["--url", f"{run.receiver.base}/hook", "--concurrency", str(in_flight), "--count", str(sizes.hook_jobs)],
            within=_drain_budget(sizes.hook_jobs) + 60,
            BENCH_WEBHOOK_SECRET=run.endpoint["secret"],
        )
        calm_rate = sizes.latency_rate
        calm = await _callback_latency(h, run, calm_rate, max(20, int(sizes.hook_latency_jobs * calm_rate / 100)))
        busy = await _callback_latency(h, run, sizes.hook_rate, sizes.hook_latency_jobs)
        await h.call(run.api, "DELETE", f"/api/v1/webhooks/{run.endpoint['id']}", run.key)
    finally:
        for proc in (run.hooks, run.worker, run.api.proc, run.receiver.proc):
            if proc is not None:
                await proc.stop()

    raw_stats = raw.get("latency_ms", {})
    raw_ms = f"raw POST {num(raw_stats.get('p50'))} / {num(raw_stats.get('p99'))}"
    missing = calm["missing"] + busy["missing"]
    h.notes.append(
        "webhooks: deliveries/s is (N - 1) / (last - first arrival) at the receiver (largest gap between two "
        f"arrivals: {gap:.2f} s); submit→callback is the receiver's arrival time minus the load generator's send "
        "time (one machine clock) for every accepted job; the raw POST figures are httpx round trips."
    )
    return [
        Row(
            "webhooks",
            f"deliveries/s: {sizes.hook_jobs} queued job.succeeded events → 1 webhook worker → verifying receiver "
            f"({settings.webhook_consumers} consumers, ≤ {settings.webhook_max_in_flight_per_endpoint} in flight "
            f"per endpoint; raw: {in_flight} concurrent)",
            num(ours),
            f"raw httpx {num(raw['per_s'])}",
            f"{num(ratio(ours, raw['per_s']), 2)} x raw",
        ),
        Row(
            "webhooks",
            f"submit→callback p50 / p99 ms at {num(calm_rate, 0)} jobs/s offered ({num(calm['accepted'])} accepted/s)",
            f"{num(calm['p50'])} / {num(calm['p99'])}",
            raw_ms,
        ),
        Row(
            "webhooks",
            f"submit→callback p50 ms at {num(sizes.hook_rate, 0)} jobs/s offered ({num(busy['accepted'])} accepted/s)",
            num(busy["p50"]),
            f"raw POST {num(raw_stats.get('p50'))}",
            "—",
            "≤ 25 ms",
            busy["p50"] <= 25,
        ),
        Row(
            "webhooks",
            f"submit→callback p99 ms at {num(sizes.hook_rate, 0)} jobs/s offered ({num(busy['accepted'])} accepted/s)",
            num(busy["p99"]),
            f"raw POST {num(raw_stats.get('p99'))}",
            "—",
            "≤ 150 ms",
            busy["p99"] <= 150,
        ),
        Row(
            "webhooks",
            "callbacks missing / failing signature verification",
            f"{missing} / {run.rejected}",
            f"raw {raw['failed']} failed",
            "—",
            "0 / 0",
            missing == 0 and run.rejected == 0,
        ),
    ]


async def _hooks_setup(h: Harness) -> Hooks:
    """API, a client key, an endpoint registered for job.succeeded, its receiver, and one job worker."""
    api = await h.start_api()
    key = await h.client_key(api)
    port = free_port()
    hook = {"url": f"http://127.0.0.1:{port}/hook", "events": ["job.succeeded"], "description": "bench receiver"}
    endpoint = await h.call(api, "POST", "/api/v1/webhooks", key, hook)
    env = {**h.env.process_env(), "BENCH_WEBHOOK_SECRET": endpoint["secret"]}
    receiver = Server(h.procs.start("receiver", ["-m", "bench.receiver", "--port", str(port)], env), port)
    await wait_http_ready(receiver.proc, f"{receiver.base}/records")
    worker = await h.start_job_worker(HOOK_JOB_CONSUMERS, name="job-worker-hooks")
    return Hooks(api, key, endpoint, receiver, worker)


async def _delivery_drain(h: Harness, run: Hooks, jobs: int) -> tuple[float, float]:
    """N jobs run first, so their events wait in <ns>.webhooks.events; then one webhook worker drains them.
    Returns deliveries/s and the largest gap between two arrivals."""
    await h.loadgen(run.api.jobs_url, run.key, concurrency=32, requests=jobs, name="loadgen-hook-jobs")
    await h.wait_succeeded(jobs, _drain_budget(jobs), f"{jobs} jobs for webhooks")
    events_queue = h.env.settings_topology().names.webhook_events_queue

    async def events_waiting() -> bool:
        return (await h.broker.depth_and_consumers(events_queue))[0] >= jobs

    await until(events_waiting, 60, "job.succeeded events in the webhook events queue")
    run.hooks = await h.start_webhook_worker()
    procs = {"webhook worker": run.hooks}
    async with h.profiled("webhook-worker-drain", run.hooks), h.metered("the webhook drain", procs):
        delivered = await _collect(run.receiver, jobs, _drain_budget(jobs))
    if delivered["verified"] < jobs:
        raise RuntimeError(f"only {delivered['verified']} of {jobs} deliveries arrived")
    run.rejected += delivered["rejected"]
    arrivals = sorted(r[0] for r in delivered["records"])
    gap = max((b - a for a, b in itertools.pairwise(arrivals)), default=0.0)
    per_s = (len(arrivals) - 1) / max(arrivals[-1] - arrivals[0], 1e-6) if len(arrivals) > 1 else 0.0
    return per_s, gap


async def _callback_latency(h: Harness, run: Hooks, rate: float, jobs: int) -> dict[str, float]:
    """Submit at `rate` with everything running; submit -> verified callback per accepted job, in ms."""
    await reset_receiver(run.receiver)
    ids = h.work / f"webhook-latency-{rate:g}.ids"
    procs = {"API": run.api.proc, "job worker": run.worker}
    if run.hooks is not None:
        procs["webhook worker"] = run.hooks
    async with h.metered(f"submit→callback at {rate:g} jobs/s, until the last callback", procs):
        load = await h.loadgen(
            run.api.jobs_url,
            run.key,
            concurrency=32,
            requests=jobs,
            rate=rate,
            ids_out=ids,
            name=f"loadgen-hook-latency-{rate:g}",
        )
        sent = read_ids(ids)
        got = await _collect(run.receiver, len(sent), _drain_budget(len(sent)))
    run.rejected += got["rejected"]
    arrived = {r[3]: r[0] for r in got["records"] if r[2] == "job.succeeded" and r[3] in sent}
    latencies = [(arrived[job] - at) * 1000 for job, at in sent.items() if job in arrived]
    return {
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
        "accepted": load["per_s"],
        "missing": len(sent) - len(latencies),
    }


async def _collect(receiver: Server, count: int, within: float) -> dict[str, Any]:
    """What the receiver got, once it has `count` verified callbacks or `within` seconds passed."""
    deadline = time.monotonic() + within
    while True:
        if not receiver.proc.alive():
            raise RuntimeError(f"receiver exited:\n{receiver.proc.tail()}")
        got = await records(receiver)
        if got["verified"] >= count or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.25)


# -- soak ---------------------------------------------------------------------------------------------------
async def soak(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("soak", job_consumers_default=SOAK_CONSUMERS, job_consumers_critical=0, job_consumers_bulk=0)
    await h.env.reset()
    api = await h.start_api()
    worker = await h.start_job_worker(SOAK_CONSUMERS, name="job-worker-soak")
    key = await h.client_key(api)
    memory: dict[str, list[float | None]] = {"API": [api.proc.rss_mib()], "worker": [worker.rss_mib()]}
    accepted: list[str] = []
    errors = 0
    started = time.monotonic()
    for part, count in enumerate((sizes.soak_checkpoint, sizes.soak_jobs - sizes.soak_checkpoint), start=1):
        ids = h.work / f"soak-{part}.ids"
        label = f"soak jobs {len(accepted) + 1:,} to {len(accepted) + count:,}"
        async with h.metered(label, {"API": api.proc, "job worker": worker}):
            load = await h.loadgen(
                api.jobs_url,
                key,
                concurrency=SOAK_CLIENTS,
                requests=count,
                ids_out=ids,
                max_seconds=max(900.0, count / 10),
                name=f"loadgen-soak-{part}",
            )
            errors += load["errors"]
            accepted += list(read_ids(ids))
            await _until_drained(h, len(accepted), api.proc, worker)
        memory["API"].append(api.proc.rss_mib())
        memory["worker"].append(worker.rss_mib())
    elapsed = time.monotonic() - started
    check = await h.db.soak_check(accepted)
    outbox = await h.db.outbox_rows()
    left = await h.db.outbox_by_key()
    await worker.stop()
    await api.proc.stop()

    rows = []
    for name, (start, middle, end) in memory.items():
        growth = (end - middle) / middle * 100 if end and middle else None
        rows.append(
            Row(
                "soak",
                f"{name} resident MiB at start / {sizes.soak_checkpoint:,}th / {sizes.soak_jobs:,}th job",
                f"{num(start)} / {num(middle)} / {num(end)}",
                "—",
                f"{'+' if growth and growth >= 0 else ''}{num(growth)} % from {sizes.soak_checkpoint:,} to end",
                "< 10 % growth",
                growth is not None and growth < 10,
            )
        )
    duplicated = check["reran"] + check["succeeded_twice"]
    rows.append(
        Row(
            "soak",
            f"lost / duplicated of {len(accepted):,} accepted jobs "
            f"({errors} submit errors, {check['extra']} unacknowledged rows)",
            f"{check['lost']} / {duplicated}",
            "—",
            "—",
            "0 / 0",
            check["lost"] == 0 and duplicated == 0,
        )
    )
    rows.append(
        Row(
            "soak",
            f"jobs/s through API and worker together ({SOAK_CLIENTS} clients, C = {SOAK_CONSUMERS}); "
            "outbox rows left after the drain",
            f"{num(len(accepted) / elapsed)}; {outbox:,} rows ("
            + ", ".join(f"{n:,} {key}" for key, n in left.items())
            + ")",
        )
    )
    return rows


async def _until_drained(h: Harness, count: int, *watch: Proc) -> None:
    async def drained() -> bool:
        for proc in watch:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited:\n{proc.tail()}")
        return await h.db.succeeded() >= count

    await until(drained, _drain_budget(count), f"soak drain of {count} jobs", interval=0.5)


Scenario = Callable[[Harness, Sizes], Awaitable[list[Row]]]
SCENARIOS: dict[str, Scenario] = {
    "ingest": ingest,
    "end-to-end": end_to_end,
    "webhooks": webhooks,
    "soak": soak,
}
