"""The end-to-end scenario: N queued jobs drained by one job worker with C consumers, beside raw consumers
(a: no-op, b: claim + finish by hand with asyncpg) and beside the peers, Celery and Dramatiq draining the same
N no-op tasks (bench/peers/); then submit -> succeeded latency at a fixed moderate rate."""

import contextlib
import sys
from dataclasses import dataclass
from typing import Any, NamedTuple

from app.core.names import Lane
from bench import costs
from bench.costs import Cost
from bench.harness import CLIENT_ID, Harness, read_ids
from bench.peers.drain import PEERS, PeerResult, drain_all
from bench.preload import preload
from bench.procs import until
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget
from bench.stats import median, percentile

DRAIN_CONSUMERS = (1, 8, 32)
DRAIN_TARGET_CONSUMERS = 32
LATENCY_CONSUMERS = 8
LATENCY_TARGET_MS = 10


@dataclass(frozen=True)
class Drained:
    """One drain with C consumers: ours, (a) and (b) in jobs/s, and the job worker's CPU per job."""

    consumers: int
    ours: float
    cpu_ms: float | None  # job worker CPU per job, ms
    noop: float
    by_hand: float
    rounds: int = 1  # more than one: each figure is the median of this many rounds
    cost: Cost | None = None  # per job, by service (the target's drains)

    @property
    def shown(self) -> str:
        return "" if self.rounds == 1 else f", median of {self.rounds} rounds"


def _say(text: str) -> None:
    print(f"bench: {text}", file=sys.stderr, flush=True)


async def end_to_end(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("end-to-end", job_consumers_default="C", job_consumers_critical=0, job_consumers_bulk=0)
    drains = [
        await _drain(h, sizes.drain_jobs, consumers)
        for consumers in [c for c in DRAIN_CONSUMERS if c != DRAIN_TARGET_CONSUMERS]
    ]
    target, peers = await _rounds(h, sizes)
    drains.append(target)
    rows = [_drain_row(d, sizes.drain_jobs, peers) for d in drains]
    rows += _peer_rows(target, sizes.drain_jobs, peers)
    dramatiq = None if isinstance(peers, str) else peers["Dramatiq"].cost
    rows += costs.rows(target.cost, dramatiq, DRAIN_TARGET_CONSUMERS, peers if isinstance(peers, str) else "")
    rows.append(await _latency_at_rate(h, sizes))
    pool = 2 * h.env.settings().db_pool_size
    h.notes.append(
        f"end-to-end: each drain pre-loads {sizes.drain_jobs} queued echo jobs with the service's own tables and "
        "message code (bench/preload.py) while no consumer runs, then starts one `python -m app worker jobs`; its "
        "jobs/s is N / (last finished_at - first started_at) from the database. (a) and (b) time the first message "
        f"to the N-th ack in their own process; (b) uses an asyncpg pool of {pool} (the service engine's pool + "
        "overflow). Celery and Dramatiq: N no-op tasks sent while no worker runs, then N / (latest task finish - "
        "earliest task start), each task recording both in Redis with one Lua call (bench/peers/)."
    )
    return rows


async def _rounds(h: Harness, sizes: Sizes) -> tuple[Drained, dict[str, PeerResult] | str]:
    """The drain at C = 32 and the peers' drains, in `drain_rounds` rounds that each run all of them in turn:
    the machine's speed drifts by tens of percent within minutes, so each figure is the median of its rounds,
    every one measured beside the others of its round. Each round's figures are in the notes."""
    c = DRAIN_TARGET_CONSUMERS
    rounds = [(await _drain(h, sizes.drain_jobs, c, profiled=True, costed=True), await _peers(h, sizes))]
    while len(rounds) < sizes.drain_rounds and not isinstance(rounds[-1][1], str):
        rounds.append((await _drain(h, sizes.drain_jobs, c, costed=True), await _peers(h, sizes)))
    for number, (d, peers) in enumerate(rounds, start=1):
        shown = (
            ""
            if isinstance(peers, str)
            else "".join(f", {label} {num(p.per_s)} jobs/s at {num(p.cpu_ms, 2)} ms" for label, p in peers.items())
        )
        h.notes.append(
            f"end-to-end at C = {DRAIN_TARGET_CONSUMERS}, round {number} of {len(rounds)}: ours {num(d.ours)} jobs/s "
            f"at {num(d.cpu_ms, 2)} ms CPU per job, (a) {num(d.noop)}, (b) {num(d.by_hand)}{shown}."
        )
    if len(rounds) == 1:
        return rounds[0]
    drained = Drained(
        DRAIN_TARGET_CONSUMERS,
        median([d.ours for d, _ in rounds]),
        median([d.cpu_ms for d, _ in rounds]),
        median([d.noop for d, _ in rounds]),
        median([d.by_hand for d, _ in rounds]),
        len(rounds),
        costs.median_of([d.cost for d, _ in rounds]),
    )
    if isinstance(rounds[-1][1], str):  # the peers failed in a later round: the rows say so
        return drained, rounds[-1][1]
    measured = [p for _, p in rounds if not isinstance(p, str)]  # every round's: a round follows a success only
    peers = {
        label: PeerResult(
            label,
            first.tasks,
            median([p[label].per_s for p in measured]),
            median([p[label].cpu_ms for p in measured]),
            median([p[label].cores for p in measured]),
            costs.median_of([p[label].cost for p in measured]),
        )
        for label, first in measured[0].items()
    }
    return drained, peers


async def _drain(h: Harness, jobs: int, consumers: int, profiled: bool = False, costed: bool = False) -> Drained:
    ours, per_job, cost = await drain_once(h, jobs, consumers, profiled=profiled, costed=costed)
    names = h.env.settings_topology().names
    noop = await _baseline(h, jobs, consumers, ["--mode", "noop"])
    pool = 2 * h.env.settings().db_pool_size  # the service's engine: pool size + as many again as overflow
    by_hand = ["--mode", "asyncpg", "--dsn", h.env.dsn, "--pool-size", str(pool)]
    asyncpg = await _baseline(h, jobs, consumers, [*by_hand, "--events-exchange", names.events_exchange])
    if await h.db.succeeded() != jobs:
        raise RuntimeError("baseline (b) did not leave every job succeeded")
    return Drained(consumers, ours, per_job, noop, asyncpg, cost=cost)


class Drain(NamedTuple):
    per_s: float
    cpu_ms: float | None  # the job worker's CPU per job, None when it ran nearly all of them before it was metered
    cost: Cost | None = None  # what a job cost each service, when asked for and counted


async def drain_once(
    h: Harness,
    jobs: int,
    consumers: int,
    module: str = "app",
    profiled: bool = False,
    label: str = "",
    costed: bool = False,
) -> Drain:
    """One job worker (started with `module`) draining `jobs` pre-loaded echo jobs with `consumers` consumers: its
    jobs/s, its CPU per job in ms and, when `costed`, the services' counters per job (bench/costs.py)."""
    names = h.env.settings_topology().names
    budget = drain_budget(jobs)
    await h.env.reset()
    await preload(h.env.database_url, h.broker, names, CLIENT_ID, jobs)
    window = costs.Window(h.env.dsn)
    if costed:
        await window.open()
    name = f"job-worker-c{consumers}{label}"
    worker = await h.start_job_worker(consumers, name=name, module=module)
    profile: contextlib.AbstractAsyncContextManager[Any] = (
        h.profiled(f"drain-worker-c{consumers}", worker) if profiled else contextlib.nullcontext()
    )
    before, used = await h.db.succeeded(), dict[str, float]()
    async with profile, h.metered(f"the drain with C = {consumers}{label}", {"worker": worker}, used):
        await h.wait_succeeded(jobs, budget, f"drain of {jobs} jobs with C={consumers}{label}")
    await worker.stop()
    first, last, done = await h.db.drain_window()
    ours = done / max((last - first).total_seconds(), 1e-6)
    # As for the peers: CPU from when the worker's consumers were all attached to the N-th job, per job run in
    # between; n/a when the worker had run nearly all of them before (a tiny quick-mode drain).
    counted = done - before
    per_job = used["worker"] * 1000 / counted if counted >= max(1, jobs // 10) else None
    h.notes.append(
        f"job worker CPU per job in the drain with C = {consumers}{label}: {num(per_job, 2)} ms "
        f"(over the last {counted} of {done} jobs)."
    )
    cost = await window.close(done, used, counted) if costed and per_job is not None else None
    return Drain(ours, per_job, cost)


async def _baseline(h: Harness, jobs: int, consumers: int, mode: list[str]) -> float:
    """A raw consumer baseline's jobs/s on freshly pre-loaded jobs."""
    names = h.env.settings_topology().names
    budget = drain_budget(jobs)
    await h.env.reset()
    await preload(h.env.database_url, h.broker, names, CLIENT_ID, jobs)
    lane = names.lane_queue(Lane.DEFAULT)
    common = ["--queue", lane, "--consumers", str(consumers), "--expect", str(jobs), "--max-seconds", str(budget)]
    name = f"consumers-{mode[1]}-c{consumers}"
    result = await h.tool(name, "bench.baseline_consumers", [*mode, *common], within=budget + 60)
    if not result["complete"]:
        raise RuntimeError(f"baseline {result['mode']} drained {result['count']} of {jobs}")
    return float(result["per_s"])


# -- the peers --------------------------------------------------------------------------------------------
async def _peers(h: Harness, sizes: Sizes) -> dict[str, PeerResult] | str:
    """Celery's and Dramatiq's drains by label, or why there are none (quick mode, or their failure)."""
    if not sizes.peers:
        return "skipped in quick mode"
    try:
        results = await drain_all(h, sizes.drain_jobs, _say)
    except Exception as exc:  # the service's own rows still count; the peers' rows say what went wrong
        _say(f"the peers failed: {type(exc).__name__}: {exc}")
        return f"failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:160]}"
    for peer, result in zip(PEERS, results, strict=True):
        h.notes.append(
            f"{peer.label} ({peer.how}): {result.tasks} tasks, worker process tree {result.cores:.2f} cores, "
            f"{num(result.cpu_ms, 2)} ms CPU per task."
        )
    return {result.label: result for result in results}


def _vs_peers(ours: float, peers: dict[str, PeerResult] | str) -> tuple[str, str]:
    if isinstance(peers, str):
        return f" · Celery, Dramatiq: {peers}", ""
    shown = " · ".join(f"{label} {num(p.per_s)}" for label, p in peers.items())
    ratios = " · ".join(f"{num(ratio(ours, p.per_s), 2)} x {label}" for label, p in peers.items())
    return f" · {shown}", f" · {ratios}"


def _drain_row(d: Drained, jobs: int, peers: dict[str, PeerResult] | str) -> Row:
    vs_a, vs_b = ratio(d.ours, d.noop, 3), ratio(d.ours, d.by_hand)
    peer_shown, peer_ratios = _vs_peers(d.ours, peers)
    at_target = d.consumers == DRAIN_TARGET_CONSUMERS
    met: bool | None = None
    if at_target:
        met = vs_b is not None and vs_b >= 2
        if met:  # and the Celery half, when there is a Celery figure
            celery = None if isinstance(peers, str) else ratio(d.ours, peers["Celery"].per_s)
            met = None if isinstance(peers, str) else (celery is not None and celery >= 1.0)
    return Row(
        "end-to-end",
        f"jobs/s draining {jobs} queued echo jobs, 1 worker, C = {d.consumers}{d.shown}",
        num(d.ours),
        f"(a) {num(d.noop)} · (b) {num(d.by_hand)}{peer_shown}",
        f"{num(vs_a, 3)} x (a) · {num(vs_b, 2)} x (b){peer_ratios}",
        "≥ 1.0 x Celery and ≥ 2 x (b)" if at_target else "—",
        met,
    )


def _peer_rows(d: Drained, jobs: int, peers: dict[str, PeerResult] | str) -> list[Row]:
    """The stretch target against Dramatiq, and CPU per job beside the peers' CPU per task."""
    c = DRAIN_TARGET_CONSUMERS
    stretch = f"jobs/s at C = {c} beside Dramatiq (the same {jobs} tasks, no-op; stretch target{d.shown})"
    cpu = f"job-worker CPU per job, ms (drain at C = {c}; peers: their worker process tree, per task{d.shown})"
    if isinstance(peers, str):
        return [
            Row("end-to-end", stretch, num(d.ours), f"Dramatiq: {peers}", "—", "≥ 1.0 x Dramatiq (stretch)"),
            Row("end-to-end", cpu, num(d.cpu_ms, 2), f"Celery, Dramatiq: {peers}", "—", "≤ Dramatiq's"),
        ]
    dramatiq = peers["Dramatiq"]
    speed = ratio(d.ours, dramatiq.per_s)
    costs = " · ".join(f"{label} {num(p.cpu_ms, 2)}" for label, p in peers.items())
    per = " · ".join(f"{num(ratio(d.cpu_ms, p.cpu_ms), 2)} x {label}" for label, p in peers.items())
    cheaper = dramatiq.cpu_ms is not None and d.cpu_ms is not None and d.cpu_ms <= dramatiq.cpu_ms
    return [
        Row(
            "end-to-end",
            stretch,
            num(d.ours),
            f"Dramatiq {num(dramatiq.per_s)}",
            f"{num(speed, 2)} x Dramatiq",
            "≥ 1.0 x Dramatiq (stretch)",
            speed is not None and speed >= 1.0,
        ),
        Row("end-to-end", cpu, num(d.cpu_ms, 2), costs, per, "≤ Dramatiq's", cheaper),
    ]


# -- latency ----------------------------------------------------------------------------------------------
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

    await until(all_done, drain_budget(len(sent)), "end-to-end latency jobs", interval=0.2)
    latencies = await h.db.latencies_ms(sent)
    await worker.stop()
    await api.proc.stop()
    achieved = load["per_s"]
    p50 = percentile(latencies, 50)
    return Row(
        "end-to-end",
        f"submit→succeeded p50 / p99 ms at {num(sizes.latency_rate, 0)} jobs/s offered "
        f"({num(achieved)} accepted/s, C = {LATENCY_CONSUMERS}; DB finished_at - created_at)",
        f"{num(p50)} / {num(percentile(latencies, 99))}",
        "—",
        "—",
        f"p50 ≤ {LATENCY_TARGET_MS} ms at 20 jobs/s",
        p50 <= LATENCY_TARGET_MS if sizes.latency_rate == 20 else None,
    )
