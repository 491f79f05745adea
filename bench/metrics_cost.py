"""The metrics-cost scenario: what moving the metrics costs the hot paths. The same drain (N pre-loaded echo
jobs, one job worker, C = 32) and the same ingest (POST /api/v1/jobs, 32 clients, the API alone) run with the
service as shipped ("on") and with every metric update a no-op ("off", bench/metrics_off.py), on and off taking
turns so that a drift of the machine's speed falls on both arms alike. Each figure is the median of its rounds.

A few microseconds per job are far below what two arms of whole-process runs on a shared machine can tell apart
(their rounds differ by more than 10 % between themselves), so the scenario also times the metric updates of one
job and of one submit in-process, with the service's own calls, and sets them beside the CPU a job or a submit
costs with metrics off.
"""

import time
from statistics import median

from app.core import metrics
from bench.end_to_end import drain_once
from bench.harness import Harness
from bench.report import Row, num, ratio
from bench.sizes import Sizes

CONSUMERS = 32
CLIENTS = 32
ARMS = (("on", "app"), ("off", "bench.metrics_off"))
WITHIN = 0.95  # on / off: within the noise whatever the spread when "on" keeps this much of "off"
BATCH = 32  # jobs per group-commit batch in the in-process timing (C = 32 fills a batch)
UPDATE_ROUNDS = 20_000
SHARE_TARGET = 0.01  # the updates of one job or submit: at most this share of its CPU


async def metrics_cost(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("metrics_cost", job_consumers_default=CONSUMERS, job_consumers_critical=0, job_consumers_bulk=0)
    drains: dict[str, list[tuple[float, float | None]]] = {"on": [], "off": []}
    ingests: dict[str, list[tuple[float, float | None]]] = {"on": [], "off": []}
    for round_ in range(sizes.cost_rounds):
        for arm, module in ARMS if round_ % 2 == 0 else reversed(ARMS):
            drained = await drain_once(h, sizes.drain_jobs, CONSUMERS, module, label=f" (metrics {arm})")
            drains[arm].append((drained.per_s, drained.cpu_ms))
            ingests[arm].append(await _ingest(h, sizes, arm, module))
    h.notes.append(
        f"metrics_cost: {sizes.cost_rounds} rounds of each arm, taking turns (on, off, then off, on, ...); "
        "'off' is the service with prometheus_client's inc/set/observe as no-ops and an HTTP middleware that only "
        f"passes requests on (bench/metrics_off.py). Rounds, jobs/s: drain on {_all(drains['on'])}, "
        f"off {_all(drains['off'])}; ingest on {_all(ingests['on'])}, off {_all(ingests['off'])}."
    )
    per_job, per_request = update_costs()
    return [
        _speed_row(f"drain jobs/s, {sizes.drain_jobs} echo jobs, C = {CONSUMERS}", drains),
        _cpu_row(f"job-worker CPU per job, ms (drain, C = {CONSUMERS})", drains),
        _share_row("the metric updates of one job (timed in-process)", per_job, _medians(drains["off"])[1]),
        _speed_row(f"ingest jobs/s, {CLIENTS} clients", ingests),
        _cpu_row(f"API CPU per submit, ms ({CLIENTS} clients)", ingests),
        _share_row("the metric updates of one submit (timed in-process)", per_request, _medians(ingests["off"])[1]),
    ]


def update_costs(rounds: int = UPDATE_ROUNDS) -> tuple[float, float]:
    """Microseconds of the metric updates the hot paths make per job and per submit, timed in this process with
    the service's own calls: for a batch of BATCH jobs, each job's duration observe, the batch's outcome count and
    the claim and finish batches' size and flush-time observes; for a submit, the request's count and latency and
    the saved job's count."""
    job_type, status = "echo", "succeeded"
    started = time.perf_counter()
    for _ in range(rounds):
        for _ in range(BATCH):
            metrics.duration(job_type).observe(0.001)
        metrics.count_outcomes([(job_type, status)] * BATCH)
        for name in ("claims", "finishes"):
            metrics.batch_sizes(name).observe(BATCH)
            metrics.flush_times(name).observe(0.002)
    per_job = (time.perf_counter() - started) * 1e6 / (rounds * BATCH)
    labels = ("/api/v1/jobs", "POST", "201")
    started = time.perf_counter()
    for _ in range(rounds * BATCH):
        metrics.http_requests(*labels).inc()
        metrics.http_duration(*labels).observe(0.004)
        metrics.count_submitted([(job_type, "bench", 5)])
    per_request = (time.perf_counter() - started) * 1e6 / (rounds * BATCH)
    return per_job, per_request


async def _ingest(h: Harness, sizes: Sizes, arm: str, module: str) -> tuple[float, float | None]:
    label = f"ingest at {CLIENTS} clients (metrics {arm})"
    per_s, cores, _ = await h.ingest_once(CLIENTS, sizes, f"metrics-{arm}", label, module=module)
    return per_s, (cores["API"] * 1000 / per_s if per_s else None)


def _medians(rounds: list[tuple[float, float | None]]) -> tuple[float, float | None]:
    cpus = [cpu for _, cpu in rounds if cpu is not None]
    return median(speed for speed, _ in rounds), (median(cpus) if cpus else None)


def _all(rounds: list[tuple[float, float | None]]) -> str:
    return " / ".join(num(speed) for speed, _ in rounds)


def _speed_row(figure: str, arms: dict[str, list[tuple[float, float | None]]]) -> Row:
    """Within the noise: the medians of the two arms differ by less than one arm's rounds differ among
    themselves, or "on" keeps WITHIN of "off" (a single round has no spread)."""
    on, off = _medians(arms["on"])[0], _medians(arms["off"])[0]
    kept = ratio(on, off, 3)
    spread = max(max(speeds) - min(speeds) for speeds in ([s for s, _ in rounds] for rounds in arms.values()))
    met = kept is not None and (kept >= WITHIN or abs(on - off) <= spread)
    return Row(
        "metrics_cost",
        figure + ", metrics on",
        num(on),
        f"metrics off {num(off)}",
        f"{num(kept, 3)} x off; on - off {num(on - off)}, rounds spread {num(spread)}",
        f"within noise: |on - off| ≤ spread, or ≥ {WITHIN} x off",
        met,
    )


def _share_row(figure: str, micros: float, cpu_ms: float | None) -> Row:
    share = micros / (cpu_ms * 1000) if cpu_ms else None
    return Row(
        "metrics_cost",
        figure + ", µs",
        num(micros, 2),
        f"CPU per unit with metrics off {num(cpu_ms * 1000 if cpu_ms else None, 0)} µs",
        f"{num(share * 100 if share is not None else None, 2)} %",
        f"≤ {SHARE_TARGET * 100:g} %",
        share is not None and share <= SHARE_TARGET,
    )


def _cpu_row(figure: str, arms: dict[str, list[tuple[float, float | None]]]) -> Row:
    on, off = _medians(arms["on"])[1], _medians(arms["off"])[1]
    return Row("metrics_cost", figure + ", metrics on", num(on, 2), f"metrics off {num(off, 2)}", _over(on, off))


def _over(on: float | None, off: float | None) -> str:
    if on is None or off is None or off == 0:
        return "—"
    return f"{num(ratio(on, off, 3), 3)} x off"
