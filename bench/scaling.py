"""The scaling scenario: the drain with 1, 2 and 4 job-worker processes and the ingest with 1 and 2 API processes,
on classic and on quorum queues, against the one PostgreSQL, Redis and RabbitMQ node of this machine.

Each drain saves N queued echo jobs, starts its worker processes (C consumers each), and publishes the jobs'
messages once every consumer is attached (publishing is many times faster than any drain here): N over the time
from then to the last finish, so no process that attached first gets a head start. Each figure stands beside the
same run's one-process figure on the same queue type, and the quorum figures beside the classic ones; the CPU
notes (cores of each process, PostgreSQL, RabbitMQ, Redis and the machine) say which of them saturated first.
"""

from datetime import UTC, datetime

from bench.harness import CLIENT_ID, Harness
from bench.preload import save_queued
from bench.procs import Proc, tree_cpu_seconds
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget

WORKER_PROCESSES = (1, 2, 4)
API_PROCESSES = (1, 2)
CONSUMERS = 32  # per job-worker process, as the single-process drain's target
CLIENTS = 32
QUEUE_TYPES = ("classic", "quorum")


async def scaling(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("scaling", job_consumers_default=CONSUMERS, job_consumers_critical=0, job_consumers_bulk=0)
    drains: dict[tuple[str, int], tuple[float, dict[str, float]]] = {}
    ingests: dict[tuple[str, int], tuple[float, dict[str, float]]] = {}
    workers = [n for n in WORKER_PROCESSES if n <= sizes.scale_max_workers]
    for queue_type in QUEUE_TYPES:
        async with h.on_queues(queue_type) as on:
            for processes in workers:
                drains[queue_type, processes] = await _drain(on, sizes.scale_jobs, processes)
            for processes in API_PROCESSES:
                ingests[queue_type, processes] = await _ingest(on, sizes, processes)
    h.notes.append(
        f"scaling: drains of {sizes.scale_jobs} pre-loaded echo jobs by {', '.join(map(str, workers))} "
        "`python -m app worker jobs` "
        f"processes of C = {CONSUMERS} each, the messages published once all their consumers were attached; ingest of "
        f"`POST /api/v1/jobs` by {CLIENTS} clients against `python -m app api --processes 1 | 2`. Quorum queues on the "
        "one local node measure what the queue type costs, not a cluster's replication."
    )
    rows = []
    for queue_type in QUEUE_TYPES:
        rows += [_row(queue_type, n, "drain jobs/s", "job-worker processes", drains) for n in workers]
        rows += [_row(queue_type, n, "ingest jobs/s", "API processes", ingests) for n in API_PROCESSES]
    return rows


async def _drain(h: Harness, jobs: int, processes: int) -> tuple[float, dict[str, float]]:
    names = h.env.settings_topology().names
    await h.env.reset()
    rows = await save_queued(h.env.database_url, CLIENT_ID, jobs)
    label = f"{processes} job-worker process(es), {h.env.queue_type} queues"
    workers = await h.start_job_workers(processes, CONSUMERS, name=f"job-worker-{h.env.queue_type}")
    attached = datetime.now(UTC)
    meters = {f"job worker {i + 1}": proc for i, proc in enumerate(workers)}
    async with h.metered(f"the drain by {label}", meters) as cores:
        await h.broker.publish_job_messages(names, rows)  # many times faster than any drain here
        await h.wait_succeeded(jobs, drain_budget(jobs), f"drain of {jobs} jobs by {label}")
        cpu = sum(tree_cpu_seconds(proc.pid) for proc in workers)
    await _stop(workers)
    done, last = await h.db.finished_since(attached)
    seconds = (last - attached).total_seconds() if last is not None else 0.0
    per_s = done / seconds if seconds > 0 else 0.0
    h.notes.append(f"scaling: the drain by {label}: {num(per_s)} jobs/s; the workers' CPU: {num(cpu, 2)} s.")
    workers_total = sum(value for name, value in cores.items() if name in meters)
    return per_s, {"job workers": workers_total, **{k: v for k, v in cores.items() if k not in meters}}


async def _ingest(h: Harness, sizes: Sizes, processes: int) -> tuple[float, dict[str, float]]:
    label = f"ingest by {processes} API process(es), {CLIENTS} clients, {h.env.queue_type} queues"
    name = f"x{processes}-{h.env.queue_type}"
    per_s, cores, result = await h.ingest_once(CLIENTS, sizes, name, label, processes=processes)
    if result.get("errors"):
        h.notes.append(f"scaling: {label} had {result['errors']} error(s).")
    return per_s, cores


async def _stop(procs: list[Proc]) -> None:
    for proc in procs:
        await proc.stop()


def _row(
    queue_type: str,
    processes: int,
    figure: str,
    what: str,
    runs: dict[tuple[str, int], tuple[float, dict[str, float]]],
) -> Row:
    ours, cores = runs[queue_type, processes]
    one = runs[queue_type, 1][0]
    beside = [f"1 process {num(one)}"]
    ratios = [f"{num(ratio(ours, one, 2), 2)} x 1 process"]
    if queue_type != "classic":
        classic = runs["classic", processes][0]
        beside.append(f"classic {num(classic)}")
        ratios.append(f"{num(ratio(ours, classic, 2), 2)} x classic")
    load = " (cores: " + " · ".join(f"{name} {num(value, 2)}" for name, value in cores.items()) + ")"
    return Row(
        "scaling",
        f"{figure}, {processes} {what}, {queue_type} queues",
        num(ours) + load,
        " · ".join(beside),
        " · ".join(ratios),
    )
