"""The metrics-cost scenario: what moving the metrics costs the hot paths. The same drain (N pre-loaded echo
jobs, one job worker, C = 32) and the same ingest (POST /api/v1/jobs, 32 clients, the API alone) run with the
service as shipped ("on") and with every metric update a no-op ("off", bench/metrics_off.py), on and off taking
turns so that a drift of the machine's speed falls on both arms alike. Each figure is the median of its rounds.
"""

from statistics import median

from bench.end_to_end import drain_once
from bench.harness import Harness
from bench.report import Row, num, ratio
from bench.sizes import Sizes

CONSUMERS = 32
CLIENTS = 32
ARMS = (("on", "app"), ("off", "bench.metrics_off"))
WITHIN = 0.95  # on / off: the cost is within the noise when "on" keeps this much of "off"


async def metrics_cost(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("metrics_cost", job_consumers_default=CONSUMERS, job_consumers_critical=0, job_consumers_bulk=0)
    drains: dict[str, list[tuple[float, float | None]]] = {"on": [], "off": []}
    ingests: dict[str, list[tuple[float, float | None]]] = {"on": [], "off": []}
    for round_ in range(sizes.cost_rounds):
        for arm, module in ARMS if round_ % 2 == 0 else reversed(ARMS):
            drains[arm].append(await drain_once(h, sizes.drain_jobs, CONSUMERS, module, label=f" (metrics {arm})"))
            ingests[arm].append(await _ingest(h, sizes, arm, module))
    h.notes.append(
        f"metrics_cost: {sizes.cost_rounds} rounds of each arm, taking turns (on, off, then off, on, ...); "
        "'off' is the service with prometheus_client's inc/set/observe as no-ops and no HTTP instrumentation "
        f"middleware (bench/metrics_off.py). Rounds, jobs/s: drain on {_all(drains['on'])}, off {_all(drains['off'])}; "
        f"ingest on {_all(ingests['on'])}, off {_all(ingests['off'])}."
    )
    return [
        _speed_row(f"drain jobs/s, {sizes.drain_jobs} echo jobs, C = {CONSUMERS}", drains),
        _cpu_row(f"job-worker CPU per job, ms (drain, C = {CONSUMERS})", drains),
        _speed_row(f"ingest jobs/s, {CLIENTS} clients", ingests),
        _cpu_row(f"API CPU per submit, ms ({CLIENTS} clients)", ingests),
    ]


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
    on, off = _medians(arms["on"])[0], _medians(arms["off"])[0]
    kept = ratio(on, off, 3)
    return Row(
        "metrics_cost",
        figure + ", metrics on",
        num(on),
        f"metrics off {num(off)}",
        f"{num(kept, 3)} x off",
        f"≥ {WITHIN} x off",
        kept is not None and kept >= WITHIN,
    )


def _cpu_row(figure: str, arms: dict[str, list[tuple[float, float | None]]]) -> Row:
    on, off = _medians(arms["on"])[1], _medians(arms["off"])[1]
    return Row("metrics_cost", figure + ", metrics on", num(on, 2), f"metrics off {num(off, 2)}", _over(on, off))


def _over(on: float | None, off: float | None) -> str:
    if on is None or off is None or off == 0:
        return "—"
    return f"{num(ratio(on, off, 3), 3)} x off"
