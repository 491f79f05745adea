"""The slow-endpoint scenario (DESIGN.md rule 11: one slow endpoint hurts no one else): one client's fast
endpoint, served by one webhook worker, timed at a steady rate alone, then beside a second endpoint of the same
client that answers at once (the same fan-out, nothing slow: what a second endpoint costs), then beside one that
answers after 10 s; its p99 submit -> callback beside the slow one against its p99 alone."""

from dataclasses import dataclass
from typing import Any

from bench.harness import Harness, Server, records
from bench.hooks_common import Latency, add_endpoint, callback_latency, collect
from bench.procs import Proc
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget

SCENARIO = "slow_endpoint"
SLOW_SECONDS = 10.0
TIMEOUT_MARGIN = 5.0  # the slow answer must come well inside the service's webhook timeout, or it is a timeout
JOB_CONSUMERS = 8
WARMUP_JOBS = 100
TARGET_RATIO = 1.2


@dataclass
class Run:
    """What the scenario started."""

    api: Server | None = None
    key: str = ""
    fast: Server | None = None
    second: Server | None = None
    slow: Server | None = None
    worker: Proc | None = None
    hooks: Proc | None = None

    async def stop(self) -> None:
        """The webhook worker first: its slow attempts in flight are answered before their receiver stops."""
        servers = (self.api, self.slow, self.second, self.fast)
        for proc in (self.hooks, self.worker, *(server.proc for server in servers if server is not None)):
            if proc is not None:
                await proc.stop()


@dataclass(frozen=True)
class Measured:
    alone: Latency
    second: Latency  # beside a second endpoint that answers at once
    beside: Latency
    slow: dict[str, Any]  # the slow receiver's counts when the last fast callback of phase 3 arrived
    pending: int  # the slow endpoint's deliveries not yet answered then (in flight or in a delay tier)


async def slow_endpoint(h: Harness, sizes: Sizes) -> list[Row]:
    settings = h.env.settings()
    overrides = _timeout_override(settings.webhook_timeout_seconds)
    h.record_settings(
        SCENARIO, job_consumers_default=JOB_CONSUMERS, job_consumers_critical=0, job_consumers_bulk=0, **overrides
    )
    await h.env.reset()
    run = Run()
    try:
        measured = await _measure(h, run, sizes, overrides)
    finally:
        await run.stop()
    timeout = overrides.get("webhook_timeout_seconds", settings.webhook_timeout_seconds)
    cap = settings.webhook_max_in_flight_per_endpoint
    h.notes.append(
        f"{SCENARIO}: one client, two endpoints for job.succeeded, each with its own verifying receiver: a fast "
        f"one (answers at once) and a slow one (verifies, then answers 200 after {SLOW_SECONDS:g} s; webhook "
        f"timeout {timeout:g} s); one webhook worker ({settings.webhook_consumers} delivery consumers, ≤ {cap} in "
        f"flight per endpoint), one job worker ({JOB_CONSUMERS} consumers). After {WARMUP_JOBS} warm-up jobs, "
        f"phase 1 submits {sizes.slow_jobs} jobs at {sizes.slow_rate:g} jobs/s with only the fast endpoint; then "
        "a second endpoint answering at once is registered for phase 2 and deleted after it; then the slow endpoint is "
        "registered and phase 3 submits the same load. Each phase's figure is the fast "
        "receiver's arrival time minus the load generator's send time (one machine clock) for every accepted "
        "job, once all arrived; the slow endpoint's counts are read at that moment, then it is deleted. "
        "Deliveries over its cap go back through a delay tier without an attempt."
    )
    return _rows(measured, sizes, cap)


async def _measure(h: Harness, run: Run, sizes: Sizes, overrides: dict[str, float]) -> Measured:
    run.api = api = await h.start_api()
    run.key = key = await h.client_key(api)
    _, run.fast = await add_endpoint(h, api, key, name="receiver-fast", description="bench fast receiver")
    run.worker = await h.start_job_worker(JOB_CONSUMERS, name="job-worker-slow-endpoint")
    run.hooks = await h.start_webhook_worker(**overrides)
    await _warm_up(h, run)
    procs = {"API": api.proc, "job worker": run.worker, "webhook worker": run.hooks}

    async def phase(tag: str, label: str) -> Latency:
        assert run.fast is not None
        rate, jobs = sizes.slow_rate, sizes.slow_jobs
        return await callback_latency(h, api, key, run.fast, procs, rate=rate, jobs=jobs, tag=tag, label=label)

    alone = await phase("slow-endpoint-alone", "the fast endpoint alone")
    endpoint, run.second = await add_endpoint(h, api, key, name="receiver-second", description="bench second receiver")
    second = await phase("slow-endpoint-second", "the fast endpoint beside a second fast one")
    await h.call(api, "DELETE", f"/api/v1/webhooks/{endpoint['id']}", key)
    endpoint, run.slow = await add_endpoint(
        h, api, key, name="receiver-slow", description="bench slow receiver", delay=SLOW_SECONDS
    )
    beside = await phase("slow-endpoint-beside", "the fast endpoint beside the slow one")
    slow = await records(run.slow)
    pending = (await h.db.delivery_statuses(endpoint["id"])).get("pending", 0)
    await h.call(api, "DELETE", f"/api/v1/webhooks/{endpoint['id']}", key)
    return Measured(alone, second, beside, slow, pending)


async def _warm_up(h: Harness, run: Run) -> None:
    """A few jobs through every process first, so phase 1 does not pay for cold connections."""
    assert run.api is not None and run.fast is not None
    load = await h.loadgen(run.api.jobs_url, run.key, concurrency=8, requests=WARMUP_JOBS, name="loadgen-slow-warmup")
    got = await collect(run.fast, load["accepted"], drain_budget(WARMUP_JOBS))
    if got["verified"] < load["accepted"]:
        raise RuntimeError(f"warm-up: only {got['verified']} of {load['accepted']} callbacks arrived")


def _timeout_override(timeout: float) -> dict[str, float]:
    """WEBHOOK_TIMEOUT_SECONDS for the webhook worker, when the service's own is too short for the slow answer."""
    needed = SLOW_SECONDS + TIMEOUT_MARGIN
    return {} if timeout >= needed else {"webhook_timeout_seconds": needed}


def _rows(m: Measured, sizes: Sizes, cap: int) -> list[Row]:
    rate = f"{num(sizes.slow_rate, 0)} jobs/s"
    times = ratio(m.beside.p99, m.alone.p99)
    phases = (m.alone, m.second, m.beside)
    missing = sum(p.missing for p in phases)
    rejected = sum(p.rejected for p in phases) + m.slow["rejected"]
    second = ratio(m.second.p99, m.alone.p99)
    against_second = ratio(m.beside.p99, m.second.p99)
    return [
        Row(
            SCENARIO,
            f"fast endpoint submit→callback p50 / p99 ms at {rate}, alone ({num(m.alone.accepted)} accepted/s)",
            f"{num(m.alone.p50)} / {num(m.alone.p99)}",
        ),
        Row(
            SCENARIO,
            f"fast endpoint submit→callback p99 ms at {rate} beside a second endpoint of the same client answering "
            f"at once: what one more endpoint costs (p50 {num(m.second.p50)}; {num(m.second.accepted)} accepted/s)",
            num(m.second.p99),
            f"alone {num(m.alone.p99)}",
            f"{num(second, 2)} x alone",
        ),
        Row(
            SCENARIO,
            f"fast endpoint submit→callback p99 ms at {rate} beside the same client's endpoint answering after "
            f"{SLOW_SECONDS:g} s (p50 {num(m.beside.p50)}; {num(m.beside.accepted)} accepted/s)",
            num(m.beside.p99),
            f"alone {num(m.alone.p99)} · beside a fast one {num(m.second.p99)}",
            f"{num(times, 2)} x alone · {num(against_second, 2)} x beside a fast one",
            f"≤ {TARGET_RATIO:g} x",
            times is not None and times <= TARGET_RATIO,
        ),
        Row(
            SCENARIO,
            "slow endpoint when phase 3's last fast callback arrived: answered / in flight (most at once) / "
            "not answered yet (in flight or in a delay tier)",
            f"{m.slow['answered']} / {m.slow['in_flight']} ({m.slow['peak_in_flight']}) / {m.pending}",
            "—",
            "—",
            f"most in flight ≤ {cap}",
            m.slow["peak_in_flight"] <= cap,
        ),
        Row(
            SCENARIO,
            "fast callbacks missing / callbacks failing signature verification",
            f"{missing} / {rejected}",
            "—",
            "—",
            "0 / 0",
            missing == 0 and rejected == 0,
        ),
    ]
