"""What the webhook scenarios share: an endpoint with its own verifying receiver, waiting for its callbacks,
and submit -> callback latency at a fixed rate."""

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any

from bench.harness import Harness, Server, read_ids, records, reset_receiver
from bench.procs import Proc, wait_http_ready
from bench.sizes import drain_budget
from bench.stats import percentile
from tests.local.ports import free_port


@dataclass(frozen=True)
class Latency:
    """Submit -> verified callback at one offered rate, in ms, and what did not arrive."""

    p50: float
    p99: float
    accepted: float  # jobs/s the API accepted
    missing: int  # accepted jobs without a verified job.succeeded callback
    rejected: int  # callbacks failing signature verification


async def add_endpoint(
    h: Harness, api: Server, key: str, *, name: str = "receiver", description: str = "bench receiver", delay: float = 0
) -> tuple[dict[str, Any], Server]:
    """An endpoint registered for job.succeeded and its receiver (answering after `delay` seconds)."""
    port = free_port()
    hook = {"url": f"http://127.0.0.1:{port}/hook", "events": ["job.succeeded"], "description": description}
    endpoint: dict[str, Any] = await h.call(api, "POST", "/api/v1/webhooks", key, hook)
    args = ["-m", "bench.receiver", "--port", str(port)] + (["--delay", str(delay)] if delay else [])
    env = {**h.env.process_env(), "BENCH_WEBHOOK_SECRET": endpoint["secret"]}
    receiver = Server(h.procs.start(name, args, env), port)
    await wait_http_ready(receiver.proc, f"{receiver.base}/records")
    return endpoint, receiver


async def callback_latency(
    h: Harness,
    api: Server,
    key: str,
    receiver: Server,
    procs: dict[str, Proc],
    *,
    rate: float,
    jobs: int,
    tag: str,
    label: str = "submit→callback",
) -> Latency:
    """Submit `jobs` at `rate` with everything running; submit -> verified callback per accepted job. The CPU
    of `procs` is noted as `<label> at <rate> jobs/s`; `tag` names the load generator and its ids file."""
    await reset_receiver(receiver)
    ids = h.work / f"{tag}-{rate:g}.ids"
    async with contextlib.AsyncExitStack() as profiles:
        for name, proc in procs.items():
            await profiles.enter_async_context(h.profiled(f"{tag}-{rate:g}-{name.replace(' ', '-')}", proc))
        await profiles.enter_async_context(h.metered(f"{label} at {rate:g} jobs/s, until the last callback", procs))
        load = await h.loadgen(
            api.jobs_url, key, concurrency=32, requests=jobs, rate=rate, ids_out=ids, name=f"loadgen-{tag}-{rate:g}"
        )
        sent = read_ids(ids)
        got = await collect(receiver, len(sent), drain_budget(len(sent)))
    arrived = {r[3]: r[0] for r in got["records"] if r[2] == "job.succeeded" and r[3] in sent}
    latencies = [(arrived[job] - at) * 1000 for job, at in sent.items() if job in arrived]
    return Latency(
        p50=percentile(latencies, 50),
        p99=percentile(latencies, 99),
        accepted=load["per_s"],
        missing=len(sent) - len(latencies),
        rejected=got["rejected"],
    )


async def collect(receiver: Server, count: int, within: float) -> dict[str, Any]:
    """What the receiver got, once it has `count` verified callbacks or `within` seconds passed."""
    deadline = time.monotonic() + within
    while True:
        if not receiver.proc.alive():
            raise RuntimeError(f"receiver exited:\n{receiver.proc.tail()}")
        got = await records(receiver)
        if got["verified"] >= count or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.25)
