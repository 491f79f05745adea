"""The ingest scenario: `POST /api/v1/jobs` at 1, 8, 32 and 128 clients against the service's API (no worker),
then `POST /api/v1/jobs/batch` with 500 jobs per request; the same single-job load against the bare baseline
API (a); and the broker's own floor for one message per job: raw confirmed publishes (bench/raw_publish.py)."""

import contextlib
from collections import Counter
from typing import Any

import httpx

from bench.harness import Harness, Server
from bench.report import Row, num, ratio
from bench.sizes import Sizes
from bench.stats import median

INGEST_LEVELS = (1, 8, 32, 128)
INGEST_TARGET_LEVEL = 32
BATCH_SIZE = 500
BATCH_CLIENTS = 4
PUBLISH_IN_FLIGHT = 100
UNAVAILABLE = (404, 405)
# Issue 50's targets: submits at 32 clients against the bare endpoint (a), the batch endpoint against raw publishes.
INGEST_TARGET = 1.2
BATCH_TARGET = 1.0


def _ms3(stats: dict[str, float]) -> str:
    return f"{num(stats.get('p50'))} / {num(stats.get('p95'))} / {num(stats.get('p99'))}"


def _errors(result: dict[str, Any]) -> str:
    odd = {code: n for code, n in result["statuses"].items() if code != "201"}
    text = str(result["errors"])
    return f"{text} ({', '.join(f'{n}x{code}' for code, n in odd.items())})" if odd else text


def _clients(n: int) -> str:
    return f"{n} client{'s' if n > 1 else ''}"


async def ingest(h: Harness, sizes: Sizes) -> list[Row]:
    # With no worker to drain them, fair turns would save all but a share of the client's jobs to wait their turn: a
    # shorter path (no lane message, no pending -> queued step) than the one a submit takes while workers keep up,
    # which is what this scenario measures. Off, every job goes to its lane as before; the read fair turns add to a
    # submit flush is measured in the noisy scenario (bench/noisy.py).
    h.record_settings("ingest", job_workers="none: the API alone", fair_share=0)
    await h.env.reset()
    warmup, target = sizes.ingest_warmup, sizes.ingest_round_requests

    def requests(clients: int) -> int:
        return target if clients == INGEST_TARGET_LEVEL else sizes.ingest_requests

    api = await h.start_api(fair_share=0)
    key = await h.client_key(api)
    ours = {c: await _ingest_level(h, api, "API", key, c, requests(c), warmup) for c in INGEST_LEVELS}
    batch = await _batch(h, api, key, sizes.batch_jobs)
    await api.proc.stop()
    base = await h.start_baseline_api()
    theirs = {c: await _ingest_level(h, base, "baseline API", "none", c, requests(c), warmup) for c in INGEST_LEVELS}
    await base.proc.stop()
    rounds = [(ours[INGEST_TARGET_LEVEL], theirs[INGEST_TARGET_LEVEL])]
    for _ in range(sizes.ingest_rounds - 1):  # the same load again, each side in turn
        api = await h.start_api(fair_share=0)
        mine = await _ingest_level(h, api, "API", key, INGEST_TARGET_LEVEL, target, warmup)
        await api.proc.stop()
        base = await h.start_baseline_api()
        rounds.append((mine, await _ingest_level(h, base, "baseline API", "none", INGEST_TARGET_LEVEL, target, warmup)))
        await base.proc.stop()
    if len(rounds) > 1:
        for number, (mine, bare) in enumerate(rounds, start=1):
            h.notes.append(
                f"ingest at {INGEST_TARGET_LEVEL} clients, round {number} of {len(rounds)}: {num(mine['per_s'])} "
                f"jobs/s, p99 {num(mine['latency_ms'].get('p99'))} ms; (a) {num(bare['per_s'])} jobs/s, p99 "
                f"{num(bare['latency_ms'].get('p99'))} ms."
            )
        ours[INGEST_TARGET_LEVEL] = _median_of([mine for mine, _ in rounds])
        theirs[INGEST_TARGET_LEVEL] = _median_of([bare for _, bare in rounds])
    publish = await _raw_publish(h, sizes.publish_messages)

    rows = [row for clients in INGEST_LEVELS for row in _level_rows(clients, ours[clients], theirs[clients])]
    rows.append(
        Row(
            "ingest",
            "errors (non-2xx or no answer), " + " / ".join(map(str, INGEST_LEVELS)) + " clients",
            " / ".join(_errors(ours[c]) for c in INGEST_LEVELS),
            "(a) " + " / ".join(_errors(theirs[c]) for c in INGEST_LEVELS),
            "—",
            f"0 at {INGEST_TARGET_LEVEL} clients",
            ours[INGEST_TARGET_LEVEL]["errors"] == 0,
        )
    )
    rows += _batch_rows(batch, publish)
    h.notes.append(
        f"ingest: {sizes.ingest_requests} measured requests per level ({target} in each round at "
        f"{INGEST_TARGET_LEVEL} clients) after {sizes.ingest_warmup} warm-up requests, closed loop, one keep-alive "
        "connection per client; latency is the client's round trip. "
        f"Batch: {BATCH_CLIENTS} clients, {BATCH_SIZE} echo jobs per request, jobs/s counts the items answered. "
        f"Raw publish: {sizes.publish_messages:,} persistent messages (about the size of a job message) to the "
        f"default exchange and a durable queue of the namespace, mandatory, on one confirming channel with "
        f"{PUBLISH_IN_FLIGHT} publishes awaiting their confirm at any time (bench/raw_publish.py)."
    )
    return rows


def _median_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Load-generator results of several rounds as one: the median rate and percentiles, every error counted."""
    statuses: Counter[str] = Counter()
    for result in results:
        statuses.update(result["statuses"])
    return {
        "per_s": median([r["per_s"] for r in results]),
        "latency_ms": {q: median([r["latency_ms"].get(q) for r in results]) for q in ("p50", "p95", "p99")},
        "errors": sum(r["errors"] for r in results),
        "statuses": dict(statuses),
        "rounds": len(results),
    }


def _level_rows(clients: int, mine: dict[str, Any], base: dict[str, Any]) -> list[Row]:
    at_target = clients == INGEST_TARGET_LEVEL
    shown = f", median of {mine['rounds']} rounds" if mine.get("rounds", 1) > 1 else ""
    speed = ratio(mine["per_s"], base["per_s"])
    p99 = mine["latency_ms"].get("p99")
    return [
        Row(
            "ingest",
            f"jobs/s, {_clients(clients)}{shown}",
            num(mine["per_s"]),
            f"(a) {num(base['per_s'])}",
            f"{num(speed, 2)} x (a)",
            f"≥ {INGEST_TARGET} x (a)" if at_target else "—",
            (speed is not None and speed >= INGEST_TARGET) if at_target else None,
        ),
        Row(
            "ingest",
            f"p50 / p95 / p99 ms, {_clients(clients)}{shown}",
            _ms3(mine["latency_ms"]),
            f"(a) {_ms3(base['latency_ms'])}",
            f"{num(ratio(p99, base['latency_ms'].get('p99')), 2)} x (a) p99",
            "p99 ≤ 50 ms" if at_target else "—",
            (p99 is not None and p99 <= 50) if at_target else None,
        ),
    ]


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
        micros = cores[role] * 1_000_000 / result["per_s"]
        h.notes.append(f"{role} CPU per accepted submit at {clients} clients: {micros:.0f} µs.")
    return result


# -- the batch endpoint and the broker's floor -------------------------------------------------------------
async def _batch(h: Harness, api: Server, key: str, jobs: int) -> dict[str, Any]:
    """Submit `jobs` echo jobs, BATCH_SIZE per request; {"unavailable": "..."} when the endpoint is not there
    (404/405) or refuses a one-job batch."""
    url = f"{api.jobs_url}/batch"
    probe = {"jobs": [{"job_type": "echo", "payload": {"n": -1, "bench": True}}]}
    async with httpx.AsyncClient(timeout=30, trust_env=False) as client:
        answer = await client.post(url, json=probe, headers={"Authorization": f"Bearer {key}"})
    if answer.status_code in UNAVAILABLE:
        return {"unavailable": f"endpoint not available (HTTP {answer.status_code})"}
    if not 200 <= answer.status_code < 300:
        return {"unavailable": f"a one-job batch was refused: HTTP {answer.status_code} {answer.text[:120]}"}
    requests = max(1, jobs // BATCH_SIZE)
    warmup = min(BATCH_CLIENTS, requests // 4)
    label = f"batch submits ({BATCH_SIZE} per request, {BATCH_CLIENTS} clients)"
    async with h.metered(label, {"API": api.proc}) as cores, h.profiled("ingest-api-batch", api.proc):
        result = await h.loadgen(
            url,
            key,
            concurrency=BATCH_CLIENTS,
            requests=requests,
            warmup=warmup,
            batch=BATCH_SIZE,
            name="loadgen-batch",
        )
    if result["jobs_per_s"]:
        per_job = cores["API"] * 1000 / result["jobs_per_s"]
        h.notes.append(f"API CPU per job submitted in batches of {BATCH_SIZE}: {per_job:.2f} ms.")
    return result


async def _raw_publish(h: Harness, count: int) -> dict[str, Any]:
    queue = h.env.raw_publish_queue
    args = ["--queue", queue, "--count", str(count), "--in-flight", str(PUBLISH_IN_FLIGHT)]
    return await h.tool("raw-publish", "bench.raw_publish", args, within=max(120.0, count / 50))


def _batch_rows(batch: dict[str, Any], publish: dict[str, Any]) -> list[Row]:
    floor = f"raw publish {num(publish['per_s'])}"
    rows = [
        Row(
            "ingest",
            f"broker floor: raw confirmed publishes/s (aio-pika, persistent, {PUBLISH_IN_FLIGHT} in flight, "
            "durable queue; one message per job)",
            "—",
            floor,
        )
    ]
    figure = f"jobs/s via POST /api/v1/jobs/batch, {BATCH_SIZE} jobs per request, {_clients(BATCH_CLIENTS)}"
    target = f"≥ {BATCH_TARGET} x raw publish"
    if "unavailable" in batch:
        return [*rows, Row("ingest", figure, batch["unavailable"], floor, "—", target, None)]
    speed = ratio(batch["jobs_per_s"], publish["per_s"])
    figure += f" ({batch['jobs']:,} jobs, errors: {_errors(batch)})"
    return [
        *rows,
        Row(
            "ingest",
            figure,
            num(batch["jobs_per_s"]),
            floor,
            f"{num(speed, 2)} x raw publish",
            target,
            speed is not None and speed >= BATCH_TARGET and batch["errors"] == 0,
        ),
    ]
