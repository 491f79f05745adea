"""The webhooks scenario: N job events delivered by one webhook worker to a signature-verifying receiver,
beside raw httpx POSTs at the same concurrency; then submit -> callback latency at a calm and a busy rate."""

import contextlib
import itertools
import time
from dataclasses import dataclass
from typing import Any

from bench.harness import Harness, Server, reset_receiver
from bench.hooks_common import Latency, add_endpoint, callback_latency, collect
from bench.procs import Proc, until
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget
from bench.stats import median

HOOK_JOB_CONSUMERS = 8
# Issue 50's targets: deliveries/s against raw httpx, and submit -> callback at hook_rate jobs/s.
RAW_TARGET = 0.9
P50_TARGET_MS = 10
P99_TARGET_MS = 40


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
        rounds: list[tuple[Drain, dict[str, Any]]] = []
        for number in range(1, sizes.hook_rounds + 1):
            drained = await _delivery_drain(h, run, sizes.hook_jobs, number)
            await reset_receiver(run.receiver)
            rounds.append((drained, await _raw(h, run, in_flight, sizes.hook_jobs)))
            await reset_receiver(run.receiver)
            h.notes.append(
                f"webhooks, round {number} of {sizes.hook_rounds}: {num(drained.per_s)} deliveries/s at "
                f"{num(drained.cpu_ms, 2)} ms of worker CPU each, raw httpx {num(rounds[-1][1]['per_s'])}/s at "
                f"{num(rounds[-1][1].get('cpu_ms_per_post'), 2)} ms."
            )
        ours, cpu_ms = (median([getattr(d, f) for d, _ in rounds]) or 0.0 for f in ("per_s", "cpu_ms"))
        gap = max(d.gap for d, _ in rounds)
        raw = {
            "per_s": median([r["per_s"] for _, r in rounds]),
            "cpu_ms_per_post": median([r.get("cpu_ms_per_post") for _, r in rounds]),
            "failed": sum(r["failed"] for _, r in rounds),
            "latency_ms": rounds[-1][1].get("latency_ms", {}),
        }
        calm_rate = sizes.latency_rate
        calm = await _callback_latency(h, run, calm_rate, max(20, int(sizes.hook_latency_jobs * calm_rate / 100)))
        busy = await _callback_latency(h, run, sizes.hook_rate, sizes.hook_latency_jobs)
        await h.call(run.api, "DELETE", f"/api/v1/webhooks/{run.endpoint['id']}", run.key)
    finally:
        for proc in (run.hooks, run.worker, run.api.proc, run.receiver.proc):
            if proc is not None:
                await proc.stop()

    shown = "" if sizes.hook_rounds == 1 else f"; median of {sizes.hook_rounds} rounds, each beside its raw run"
    raw_stats = raw.get("latency_ms", {})
    raw_ms = f"raw POST {num(raw_stats.get('p50'))} / {num(raw_stats.get('p99'))}"
    missing = calm.missing + busy.missing
    h.notes.append(
        "webhooks: deliveries/s is (N - 1) / (last - first arrival) at the receiver (largest gap between two "
        f"arrivals: {gap:.2f} s); the events wait in a queue of the bench's while the worker starts and are put "
        "back once its consumers are attached, so its CPU per delivery is metered over the whole drain; "
        "submit→callback is the receiver's arrival time minus the load generator's send time (one machine clock) "
        "for every accepted job; the raw POST figures are httpx round trips."
    )
    return [
        Row(
            "webhooks",
            f"deliveries/s: {sizes.hook_jobs} queued job.succeeded events → 1 webhook worker → verifying receiver "
            f"({settings.webhook_consumers} consumers, ≤ {settings.webhook_max_in_flight_per_endpoint} in flight "
            f"per endpoint; raw: {in_flight} concurrent{shown})",
            num(ours),
            f"raw httpx {num(raw['per_s'])}",
            f"{num(ratio(ours, raw['per_s']), 2)} x raw",
            f"≥ {RAW_TARGET} x raw",
            (ratio(ours, raw["per_s"]) or 0) >= RAW_TARGET,
        ),
        Row(
            "webhooks",
            "webhook-worker CPU per delivery, ms (the drain above, its fan-out included; raw: the httpx client's "
            f"CPU per POST{shown})",
            num(cpu_ms, 2),
            f"raw httpx {num(raw.get('cpu_ms_per_post'), 2)}",
            f"{num(ratio(cpu_ms, raw.get('cpu_ms_per_post')), 2)} x raw",
            "≤ 1 ms",
            cpu_ms <= 1.0,
        ),
        Row(
            "webhooks",
            f"submit→callback p50 / p99 ms at {num(calm_rate, 0)} jobs/s offered ({num(calm.accepted)} accepted/s)",
            f"{num(calm.p50)} / {num(calm.p99)}",
            raw_ms,
        ),
        Row(
            "webhooks",
            f"submit→callback p50 ms at {num(sizes.hook_rate, 0)} jobs/s offered ({num(busy.accepted)} accepted/s)",
            num(busy.p50),
            f"raw POST {num(raw_stats.get('p50'))}",
            "—",
            f"≤ {P50_TARGET_MS} ms",
            busy.p50 <= P50_TARGET_MS,
        ),
        Row(
            "webhooks",
            f"submit→callback p99 ms at {num(sizes.hook_rate, 0)} jobs/s offered ({num(busy.accepted)} accepted/s)",
            num(busy.p99),
            f"raw POST {num(raw_stats.get('p99'))}",
            "—",
            f"≤ {P99_TARGET_MS} ms",
            busy.p99 <= P99_TARGET_MS,
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
    endpoint, receiver = await add_endpoint(h, api, key)
    worker = await h.start_job_worker(HOOK_JOB_CONSUMERS, name="job-worker-hooks")
    return Hooks(api, key, endpoint, receiver, worker)


@dataclass(frozen=True)
class Drain:
    """One delivery drain: deliveries/s, the largest gap between two arrivals (s), worker CPU per delivery (ms)."""

    per_s: float
    gap: float
    cpu_ms: float


async def _raw(h: Harness, run: Hooks, in_flight: int, count: int) -> dict[str, Any]:
    """Raw signed httpx POSTs to the same receiver at the same concurrency."""
    return await h.tool(
        "raw-webhooks",
        "bench.raw_webhooks",
        ["--url", f"{run.receiver.base}/hook", "--concurrency", str(in_flight), "--count", str(count)],
        within=drain_budget(count) + 60,
        BENCH_WEBHOOK_SECRET=run.endpoint["secret"],
    )


async def _delivery_drain(h: Harness, run: Hooks, jobs: int, number: int) -> Drain:
    """N jobs run first, with no webhook worker running, so their events wait in <ns>.webhooks.events; they are
    set aside while one webhook worker starts, then put back, and it drains them. `number`: the round (each runs
    N more jobs)."""
    if run.hooks is not None:
        await run.hooks.stop()
        run.hooks = None
    await h.loadgen(run.api.jobs_url, run.key, concurrency=32, requests=jobs, name="loadgen-hook-jobs")
    await h.wait_succeeded(jobs * number, drain_budget(jobs), f"{jobs} jobs for webhooks")

    async def events_waiting() -> bool:  # every event confirmed, so in the queue (in bundles: count rows, not messages)
        return await h.db.unconfirmed("succeeded") == 0

    await until(events_waiting, 60, "job.succeeded events in the webhook events queue")
    # Held aside while the worker starts: it connects and attaches its consumers before the meter sees it ready,
    # and would begin the drain meanwhile (with 64 consumers attached one by one, a whole 1,000-delivery drain
    # once fit in that time on a fast day).
    events = h.env.settings_topology().names.webhook_events_queue
    held = f"{events}.bench-held"
    h.env.extra_queues.add(held)
    await h.broker.move(events, held, create=True)
    run.hooks = await h.start_webhook_worker()
    procs = {"webhook worker": run.hooks}
    profile: contextlib.AbstractAsyncContextManager[Any] = (
        h.profiled("webhook-worker-drain", run.hooks) if number == 1 else contextlib.nullcontext()
    )
    async with profile, h.metered(f"the webhook drain (round {number})", procs) as cores:
        started = time.monotonic()
        await h.broker.move(held, events)
        delivered = await collect(run.receiver, jobs, drain_budget(jobs))
        elapsed = time.monotonic() - started
    if delivered["verified"] < jobs:
        raise RuntimeError(f"only {delivered['verified']} of {jobs} deliveries arrived")
    run.rejected += delivered["rejected"]
    arrivals = sorted(r[0] for r in delivered["records"])
    gap = max((b - a for a, b in itertools.pairwise(arrivals)), default=0.0)
    per_s = (len(arrivals) - 1) / max(arrivals[-1] - arrivals[0], 1e-6) if len(arrivals) > 1 else 0.0
    # From the worker's start to the last delivery: its fan-out of every event and every attempt, per delivery.
    return Drain(per_s, gap, cores["webhook worker"] * elapsed * 1000 / jobs)


async def _callback_latency(h: Harness, run: Hooks, rate: float, jobs: int) -> Latency:
    """Submit at `rate` with everything running; submit -> verified callback per accepted job, in ms."""
    procs = {"API": run.api.proc, "job worker": run.worker}
    if run.hooks is not None:
        procs["webhook worker"] = run.hooks
    latency = await callback_latency(h, run.api, run.key, run.receiver, procs, rate=rate, jobs=jobs, tag="hook-latency")
    run.rejected += latency.rejected
    return latency
