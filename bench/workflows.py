"""The workflows scenario: what a workflow's dependencies cost beside the same jobs without them (issue 46).

Three figures, each beside its baseline in the same run:

- fan-out/fan-in: one workflow of N echo jobs that all feed one final echo job (N + 1 jobs; MAX_WORKFLOW_JOBS is
  raised for the scenario's processes), from the bench's send of `POST /api/v1/workflows` to the final job's
  `finished_at`, beside N + 1 independent echo jobs sent through the batch endpoint (500 a request, one request
  after another) to the last one's `finished_at`. One API and one job worker (C = 32) on empty tables for each
  arm; the arms take turns for `workflow_rounds` rounds and the row shows medians.
- a chain of M echo jobs, each depending on the one before: each job's `started_at` minus the previous one's
  `finished_at` (both stamped by the service), a finished dependency's handoff to its dependent through the
  release, the outbox and the lane; beside the same M jobs under one concurrency key of limit 1 (the service's
  other way to run jobs one after another, as in the flow scenario's handoff) and beside a client that submits
  each job once the previous one's `?wait=` answer said it succeeded. `workflow_rounds` chains of each, pooled.
- submits: one `POST /api/v1/workflows` of K independent echo jobs, and one of a chain of K, beside one
  `POST /api/v1/jobs/batch` of the same K jobs, one request at a time against one API and no worker
  (FAIR_SHARE=0, as in ingest: with no worker, fair turns would hold the batch's jobs back), the three taking
  turns for `workflow_submit_rounds` rounds after a warm-up; jobs/s, medians.

A service without the workflows endpoint (404 or 405 to a one-job workflow) gets one row that says so.
"""

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from statistics import median
from typing import Any

import httpx

from bench.harness import CLIENT_ID, Harness, Server
from bench.procs import CpuMeter, Proc, until
from bench.report import Row, num, ratio
from bench.sizes import Sizes, drain_budget
from bench.stats import percentile

CONSUMERS = 32
BATCH = 500  # the batch endpoint's most jobs a request
WORKFLOWS = "/api/v1/workflows"
BATCHES = "/api/v1/jobs/batch"
TARGET_FAN_IN = 1.3  # workflow / batch, time to the last job succeeded (lower is better)
TARGET_CHAIN_P50_MS = 15.0
TARGET_SUBMIT = 0.7  # workflow / batch, jobs/s
CLIENT_WAIT_S = 30
TIMES = "SELECT id, status, started_at, finished_at FROM jobs WHERE id = ANY($1::text[])"
STAGES = """
SELECT job_id, event, min(created_at) AS at FROM job_events
WHERE job_id = ANY($1::text[]) AND event IN ('pending', 'queued') GROUP BY job_id, event
"""
LAST_FINISH = """
SELECT count(*) AS n, min(started_at) AS first, max(finished_at) AS last FROM jobs
WHERE client_id = $1 AND status = 'succeeded'
"""


# -- the requests --------------------------------------------------------------------------------------------
def _echo(n: int) -> dict[str, Any]:
    return {"job_type": "echo", "payload": {"n": n}}


def fan_in(leaves: int) -> list[dict[str, Any]]:
    """`leaves` independent echo jobs and one that depends on all of them."""
    jobs = [{"ref": f"leaf-{n}", **_echo(n)} for n in range(leaves)]
    return [*jobs, {"ref": "final", **_echo(leaves), "depends_on": [job["ref"] for job in jobs]}]


def chain(length: int) -> list[dict[str, Any]]:
    """`length` echo jobs, each depending on the one before."""
    return [{"ref": f"c-{n}", **_echo(n), "depends_on": [f"c-{n - 1}"] if n else []} for n in range(length)]


def independent(count: int) -> list[dict[str, Any]]:
    return [{"ref": f"j-{n}", **_echo(n), "depends_on": []} for n in range(count)]


def _workflow(name: str, jobs: list[dict[str, Any]]) -> bytes:
    return json.dumps({"name": name, "on_failure": "cancel_dependents", "jobs": jobs}).encode()


def _batch(jobs: list[dict[str, Any]]) -> bytes:
    return json.dumps({"jobs": jobs}).encode()


@dataclass
class Client:
    """One keep-alive client of the API with a client key; bodies are encoded before the clock starts."""

    http: httpx.AsyncClient

    async def post(self, path: str, body: bytes) -> tuple[float, Any]:
        """Seconds to the answer, and the answer."""
        started = time.perf_counter()
        answer = await self.http.post(path, content=body)
        took = time.perf_counter() - started
        if answer.status_code >= 300:
            raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text[:300]}")
        return took, answer.json()


async def _client(h: Harness, api: Server) -> Client:
    key = await h.client_key(api)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    return Client(httpx.AsyncClient(base_url=api.base, headers=headers, timeout=120, trust_env=False))


def _ids(answer: dict[str, Any]) -> dict[str, str]:
    """A workflow's job ids by ref."""
    return {entry["ref"]: entry["job"]["id"] for entry in answer["jobs"]}


# -- the scenario --------------------------------------------------------------------------------------------
async def workflows(h: Harness, sizes: Sizes) -> list[Row]:
    settings = {"max_workflow_jobs": max(sizes.workflow_fan_in + 1, sizes.workflow_submit_jobs)}
    h.record_settings("workflows", job_consumers_default=CONSUMERS, **settings)
    missing = await _unavailable(h, settings)
    if missing:
        return [Row("workflows", "POST /api/v1/workflows", missing)]
    fan = await _fan_in_rounds(h, sizes, settings)
    gaps = await _chain_rounds(h, sizes, settings)
    submits = await _submit_rounds(h, sizes, settings)
    return [*_fan_in_rows(h, sizes, fan), *_chain_rows(sizes, gaps), *_submit_rows(h, sizes, submits)]


async def _unavailable(h: Harness, settings: dict[str, Any]) -> str | None:
    """Why the service cannot run a workflow (no such endpoint), or None."""
    await h.env.reset()
    api = await h.start_api(name="api-workflows-probe", **settings)
    client = await _client(h, api)
    try:
        answer = await client.http.post(WORKFLOWS, content=_workflow("probe", independent(1)))
    finally:
        await client.http.aclose()
        await api.proc.stop()
    if answer.status_code in (404, 405):
        return f"endpoint not available: HTTP {answer.status_code}"
    if answer.status_code >= 300:
        raise RuntimeError(f"a one-job workflow was refused: {answer.status_code} {answer.text[:300]}")
    return None


@dataclass
class Service:
    api: Server
    worker: Proc
    client: Client

    async def stop(self) -> None:
        await self.client.http.aclose()
        await self.worker.stop()
        await self.api.proc.stop()


async def _service(h: Harness, name: str, settings: dict[str, Any]) -> Service:
    """One API and one job worker (C = 32) on empty tables, and a client of it."""
    await h.env.reset()
    api = await h.start_api(name=f"api-{name}", **settings)
    worker = await h.start_job_worker(CONSUMERS, name=f"job-worker-{name}", **settings)
    return Service(api, worker, await _client(h, api))


# -- fan-out/fan-in ------------------------------------------------------------------------------------------
@dataclass
class FanIn:
    seconds: list[float] = field(default_factory=list)  # the workflow's, submit -> the final job succeeded
    batch: list[float] = field(default_factory=list)  # the batches', first send -> the last job succeeded
    answered_ms: list[float] = field(default_factory=list)  # the workflow's POST answered
    leaves_s: list[float] = field(default_factory=list)  # submit -> the last leaf finished
    release_ms: list[float] = field(default_factory=list)  # the last leaf finished -> the final job running
    leaves_rate: list[float] = field(default_factory=list)  # the leaves' drain, jobs/s: first start -> last finish
    batch_rate: list[float] = field(default_factory=list)  # the batches' drain, the same way
    # CPU ms per job of the job worker, the API and PostgreSQL over each arm, by arm
    cpu: dict[str, dict[str, list[float]]] = field(default_factory=dict)


async def _fan_in_rounds(h: Harness, sizes: Sizes, settings: dict[str, Any]) -> FanIn:
    fan = FanIn()
    for round_ in range(sizes.workflow_rounds):
        for arm in ("workflow", "batch") if round_ % 2 == 0 else ("batch", "workflow"):
            service = await _service(h, f"workflows-fan-in-{arm}", settings)
            try:
                meter = CpuMeter({"job worker": service.worker, "API": service.api.proc})
                async with h.profiled(f"workflows-fan-in-{arm}", service.worker):
                    if arm == "workflow":
                        await _fan_in_workflow(h, service.client, sizes.workflow_fan_in, fan)
                    else:
                        await _fan_in_batch(h, service.client, sizes.workflow_fan_in + 1, fan)
                _cpu_per_job(meter, sizes.workflow_fan_in + 1, fan.cpu.setdefault(arm, {}))
            finally:
                await service.stop()
    return fan


def _cpu_per_job(meter: CpuMeter, jobs: int, into: dict[str, list[float]]) -> None:
    wall = time.monotonic() - meter.started
    for part, cores in meter.cores().items():
        if part in ("job worker", "API", "PostgreSQL"):
            into.setdefault(part, []).append(cores * wall / jobs * 1000)


async def _fan_in_workflow(h: Harness, client: Client, leaves: int, fan: FanIn) -> None:
    body = _workflow("fan-in", fan_in(leaves))
    sent = datetime.now(UTC)
    answered, answer = await client.post(WORKFLOWS, body)
    ids = _ids(answer)
    await h.wait_succeeded(leaves + 1, drain_budget(leaves + 1), "workflows fan-in", CLIENT_ID)
    rows = {row["id"]: row for row in await h.db.pool.fetch(TIMES, list(ids.values()))}
    final = rows[ids.pop("final")]
    last_leaf = max(rows[job_id]["finished_at"] for job_id in ids.values())
    first_leaf = min(rows[job_id]["started_at"] for job_id in ids.values())
    fan.leaves_rate.append(leaves / max((last_leaf - first_leaf).total_seconds(), 1e-6))
    fan.seconds.append((final["finished_at"] - sent).total_seconds())
    fan.answered_ms.append(answered * 1000)
    fan.leaves_s.append((last_leaf - sent).total_seconds())
    fan.release_ms.append((final["started_at"] - last_leaf).total_seconds() * 1000)


async def _fan_in_batch(h: Harness, client: Client, jobs: int, fan: FanIn) -> None:
    """The same number of independent jobs through the batch endpoint: first send -> the last one succeeded."""
    bodies = [_batch([_echo(n) for n in range(start, min(jobs, start + BATCH))]) for start in range(0, jobs, BATCH)]
    sent = datetime.now(UTC)
    for body in bodies:
        await client.post(BATCHES, body)
    await h.wait_succeeded(jobs, drain_budget(jobs), "workflows fan-in baseline", CLIENT_ID)
    row = await h.db.pool.fetchrow(LAST_FINISH, CLIENT_ID)
    fan.batch.append((row["last"] - sent).total_seconds())
    fan.batch_rate.append(jobs / max((row["last"] - row["first"]).total_seconds(), 1e-6))


def _fan_in_rows(h: Harness, sizes: Sizes, fan: FanIn) -> list[Row]:
    ours, theirs = median(fan.seconds), median(fan.batch)
    share = ratio(ours, theirs, 3)
    leaves = sizes.workflow_fan_in
    h.notes.append(
        f"workflows: fan-out/fan-in rounds, s: the workflow {' / '.join(num(s, 3) for s in fan.seconds)}, the "
        f"batches {' / '.join(num(s, 3) for s in fan.batch)}; the last leaf finished → the final job running, ms: "
        f"{' / '.join(num(ms, 1) for ms in fan.release_ms)}."
    )
    return [
        Row(
            "workflows",
            f"fan-out/fan-in: submit → the final job succeeded, s, one workflow of {leaves:,} echo jobs all feeding "
            f"one ({leaves + 1:,} jobs), C = {CONSUMERS}, median of {sizes.workflow_rounds} rounds (lower is better)",
            num(ours, 3),
            f"{leaves + 1:,} independent echo jobs via the batch endpoint, to the last succeeded {num(theirs, 3)}",
            f"{num(share, 3)} x batch",
            f"≤ {TARGET_FAN_IN} x batch",
            share is not None and share <= TARGET_FAN_IN,
        ),
        Row(
            "workflows",
            "fan-out/fan-in's parts, medians: the POST answered ms / submit → the last leaf finished s / the last "
            "leaf finished → the final job running ms / the leaves' drain jobs/s (first start → last finish)",
            f"{num(median(fan.answered_ms), 1)} / {num(median(fan.leaves_s), 3)} / {num(median(fan.release_ms), 1)} / "
            f"{num(median(fan.leaves_rate))}",
            f"the batches' drain {num(median(fan.batch_rate))} jobs/s",
            f"{num(ratio(median(fan.leaves_rate), median(fan.batch_rate), 3), 3)} x the batches' drain",
        ),
        Row(
            "workflows",
            "fan-out/fan-in's CPU per job, ms, medians: job worker / API / PostgreSQL (each arm from its submit "
            "to its last job succeeded)",
            _cpu_cell(fan.cpu.get("workflow", {})),
            f"the batches' {_cpu_cell(fan.cpu.get('batch', {}))}",
            _cpu_ratios(fan.cpu),
        ),
    ]


PARTS = ("job worker", "API", "PostgreSQL")


def _cpu_cell(cpu: dict[str, list[float]]) -> str:
    return " / ".join(num(median(cpu[part]), 2) if cpu.get(part) else "n/a" for part in PARTS)


def _cpu_ratios(cpu: dict[str, dict[str, list[float]]]) -> str:
    mine, theirs = cpu.get("workflow", {}), cpu.get("batch", {})
    shares = [ratio(median(mine[p]), median(theirs[p])) if mine.get(p) and theirs.get(p) else None for p in PARTS]
    return " / ".join(f"{num(share, 2)} x" for share in shares)


# -- a chain -------------------------------------------------------------------------------------------------
@dataclass
class Gaps:
    workflow: list[float]
    keyed: list[float]
    client: list[float]
    # the workflow's handoffs in parts, ms: the dependency finished -> its dependent released (`pending`, the
    # audit row's time) -> `queued` -> running
    released: list[float] = field(default_factory=list)
    queued: list[float] = field(default_factory=list)
    claimed: list[float] = field(default_factory=list)


async def _chain_rounds(h: Harness, sizes: Sizes, settings: dict[str, Any]) -> Gaps:
    """`workflow_rounds` chains of each kind through one API and one job worker, taking turns."""
    gaps = Gaps([], [], [])
    service = await _service(h, "workflows-chain", settings)
    try:
        async with h.profiled("workflows-chain", service.worker):
            await _chains(h, service.client, sizes, gaps)
    finally:
        await service.stop()
    return gaps


async def _chains(h: Harness, client: Client, sizes: Sizes, gaps: Gaps) -> None:
    for round_ in range(sizes.workflow_rounds):
        _, answer = await client.post(WORKFLOWS, _workflow(f"chain-{round_}", chain(sizes.workflow_chain)))
        ids = list(_ids(answer).values())
        gaps.workflow += await _gaps(h, ids)
        await _stages(h, ids, gaps)
        gaps.keyed += await _gaps(h, await _keyed_chain(client, sizes.workflow_chain, round_))
        gaps.client += await _gaps(h, await _client_chain(client, sizes.workflow_chain))


async def _keyed_chain(client: Client, length: int, round_: int) -> list[str]:
    serial = {"concurrency": {"key": f"chain-{round_}", "limit": 1}}
    _, answer = await client.post(BATCHES, _batch([{**_echo(n), **serial} for n in range(length)]))
    return [item["job"]["id"] for item in answer["items"]]


async def _client_chain(client: Client, length: int) -> list[str]:
    """Each job submitted once the one before succeeded, as a client without workflows would."""
    ids = []
    for n in range(length):
        _, job = await client.post(f"/api/v1/jobs?wait={CLIENT_WAIT_S}", json.dumps(_echo(n)).encode())
        if job["status"] != "succeeded":
            raise RuntimeError(f"a chained job ended {job['status']}")
        ids.append(job["id"])
    return ids


async def _gaps(h: Harness, ids: list[str]) -> list[float]:
    """Once every job of `ids` succeeded: each one's `started_at` minus the `finished_at` of the one that ran
    before it, in ms."""

    async def done() -> bool:
        return await h.db.succeeded_of(ids) == len(ids)

    await until(done, drain_budget(len(ids)), "workflows chain", interval=0.2)
    rows = sorted(await h.db.pool.fetch(TIMES, ids), key=lambda row: row["started_at"])
    return [(b["started_at"] - a["finished_at"]).total_seconds() * 1000 for a, b in pairwise(rows)]


async def _stages(h: Harness, ids: list[str], gaps: Gaps) -> None:
    """The parts of each handoff of a workflow's chain (its jobs all succeeded), from the audit rows' times."""
    rows = sorted(await h.db.pool.fetch(TIMES, ids), key=lambda row: row["started_at"])
    at = {(row["job_id"], row["event"]): row["at"] for row in await h.db.pool.fetch(STAGES, ids)}
    for before, job in pairwise(rows):
        pending, queued = at[(job["id"], "pending")], at[(job["id"], "queued")]
        gaps.released.append((pending - before["finished_at"]).total_seconds() * 1000)
        gaps.queued.append((queued - pending).total_seconds() * 1000)
        gaps.claimed.append((job["started_at"] - queued).total_seconds() * 1000)


def _chain_rows(sizes: Sizes, gaps: Gaps) -> list[Row]:
    def p50_p95(values: list[float]) -> str:
        return f"{num(percentile(values, 50), 1)} / {num(percentile(values, 95), 1)}"

    p50 = percentile(gaps.workflow, 50)
    return [
        Row(
            "workflows",
            f"chain of {sizes.workflow_chain} echo jobs: a job succeeded → the next running, p50 / p95 ms "
            f"({len(gaps.workflow)} handoffs of {sizes.workflow_rounds} chains), C = {CONSUMERS}",
            p50_p95(gaps.workflow),
            f"one concurrency key of limit 1 {p50_p95(gaps.keyed)} · a client submitting each after the last's "
            f"?wait= answer {p50_p95(gaps.client)}",
            f"{num(ratio(p50, percentile(gaps.keyed, 50)), 2)} x key p50 · "
            f"{num(ratio(p50, percentile(gaps.client, 50)), 2)} x client p50",
            f"p50 ≤ {TARGET_CHAIN_P50_MS:g} ms",
            p50 <= TARGET_CHAIN_P50_MS,
        ),
        Row(
            "workflows",
            "the chain's handoffs in parts, p50 / p95 ms: a job finished → its dependent released (`pending`) / "
            "→ `queued` / → running (audit rows' times; a claim that comes before the confirmation is recorded "
            "writes `queued` itself)",
            f"{p50_p95(gaps.released)} · {p50_p95(gaps.queued)} · {p50_p95(gaps.claimed)}",
        ),
    ]


# -- submits -------------------------------------------------------------------------------------------------
async def _submit_rounds(h: Harness, sizes: Sizes, settings: dict[str, Any]) -> dict[str, list[float]]:
    """jobs/s of each kind of request, one request per kind a round, the kinds in turn; after one warm-up each."""
    count = sizes.workflow_submit_jobs
    bodies = {
        "fan-out": _workflow("submit-fan-out", independent(count)),
        "chain": _workflow("submit-chain", chain(count)),
        "batch": _batch([_echo(n) for n in range(count)]),
    }
    paths = {"fan-out": WORKFLOWS, "chain": WORKFLOWS, "batch": BATCHES}
    rates: dict[str, list[float]] = {kind: [] for kind in bodies}
    await h.env.reset()
    api = await h.start_api(name="api-workflows-submit", fair_share=0, **settings)
    client = await _client(h, api)
    try:
        for kind, body in bodies.items():
            await client.post(paths[kind], body)
        async with h.metered("workflow and batch submits", {"API": api.proc}), h.profiled("workflows-submit", api.proc):
            for round_ in range(sizes.workflow_submit_rounds):
                kinds = list(bodies)[round_ % 3 :] + list(bodies)[: round_ % 3]
                for kind in kinds:
                    took, _ = await client.post(paths[kind], bodies[kind])
                    rates[kind].append(count / took)
    finally:
        await client.http.aclose()
        await api.proc.stop()
    return rates


def _submit_rows(h: Harness, sizes: Sizes, rates: dict[str, list[float]]) -> list[Row]:
    count, rounds = sizes.workflow_submit_jobs, sizes.workflow_submit_rounds
    batch = median(rates["batch"])
    fan, chained = median(rates["fan-out"]), median(rates["chain"])
    share = ratio(fan, batch, 3)
    per_round = [fan_out / alone for fan_out, alone in zip(rates["fan-out"], rates["batch"], strict=True)]
    h.notes.append(
        f"workflows: submits, jobs/s of each request, {count} jobs a request, one request at a time: "
        + "; ".join(f"{kind} {' / '.join(num(r) for r in values)}" for kind, values in rates.items())
        + f". The fan-out / the batch of the same round: median {num(median(per_round), 3)} x, rounds "
        + " / ".join(num(r, 2) for r in per_round)
        + "."
    )
    figure = f"jobs/s submitted by one POST /api/v1/workflows of {count:,} echo jobs"
    baseline = f"POST /api/v1/jobs/batch of the same {count:,} {num(batch)}"
    return [
        Row(
            "workflows",
            f"{figure}, all independent (a fan-out), one request at a time, median of {rounds}",
            num(fan),
            baseline,
            f"{num(share, 3)} x batch",
            f"≥ {TARGET_SUBMIT} x batch",
            share is not None and share >= TARGET_SUBMIT,
        ),
        Row(
            "workflows",
            f"{figure}, a chain (each depends on the one before), one request at a time, median of {rounds}",
            num(chained),
            baseline,
            f"{num(ratio(chained, batch, 3), 3)} x batch",
        ),
    ]
