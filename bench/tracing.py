"""The tracing scenario: what OpenTelemetry tracing costs a drain (docs/observability.md).

Each round drains the same N pre-loaded echo jobs with one job worker (C = 32) three times, taking turns: with
tracing off (no OTLP endpoint: the service as it ships), with tracing's code path taken out (bench/tracing_off.py),
and with tracing on, exporting every span over OTLP/HTTP to a sink in the bench's process that reads and drops
them. Off against taken out is what tracing costs when nobody asked for it; on against off is what it costs when
they did (each job's spans, the asyncpg and Redis spans of its batches, and their export).
"""

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from statistics import median

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.flow import CONSUMERS, drain
from bench.harness import Harness
from bench.procs import until
from bench.report import Row, num, ratio
from bench.sizes import Sizes
from tests.local.ports import free_port

TARGET_UNUSED = 0.95  # off / taken out
ARMS = (("off", "app", False), ("taken out", "bench.tracing_off", False), ("on", "app", True))


@asynccontextmanager
async def otlp_sink() -> AsyncIterator[tuple[str, list[int]]]:
    """An OTLP/HTTP endpoint that reads each export and answers 200: its URL, and the bytes of each export."""
    received: list[int] = []

    async def traces(request: Request) -> Response:
        received.append(len(await request.body()))
        return Response(b"", media_type="application/x-protobuf")

    port = free_port()
    app = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())

    async def started() -> bool:
        return server.started

    await until(started, 10, "the OTLP sink")
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.should_exit = True
        await task


async def tracing(h: Harness, sizes: Sizes) -> list[Row]:
    h.record_settings("tracing", job_consumers_default=CONSUMERS)
    rates: dict[str, list[float]] = {arm: [] for arm, _, _ in ARMS}
    cpu: dict[str, list[float]] = {arm: [] for arm, _, _ in ARMS}
    async with otlp_sink() as (endpoint, exports):
        for round_ in range(sizes.cost_rounds):
            for arm, module, traced in ARMS if round_ % 2 == 0 else reversed(ARMS):
                otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "taskq-bench-jobs"}
                label = f"tracing-{arm.replace(' ', '-')}"
                rate, us = await drain(h, sizes.drain_jobs, label, None, module, otel if traced else None)
                rates[arm].append(rate)
                cpu[arm].append(us)
    off, out, on = (median(rates[arm]) for arm in ("off", "taken out", "on"))
    unused, cost = ratio(off, out, 3), ratio(on, off, 3)
    cpu_off, cpu_on = median(cpu["off"]), median(cpu["on"])
    h.notes.append(
        f"tracing: {sizes.cost_rounds} rounds of each arm, taking turns. Rounds, jobs/s: off "
        f"{' / '.join(num(r) for r in rates['off'])}, taken out {' / '.join(num(r) for r in rates['taken out'])}, "
        f"on {' / '.join(num(r) for r in rates['on'])}; the sink read {len(exports)} exports, "
        f"{num(sum(exports) / 1e6, 1)} MB."
    )
    return [
        Row(
            "tracing",
            f"drain jobs/s, {sizes.drain_jobs} echo jobs, tracing off, C = {CONSUMERS}",
            num(off),
            f"tracing's code taken out {num(out)}",
            f"{num(unused, 3)} x",
            f"≥ {TARGET_UNUSED} x taken out",
            unused is not None and unused >= TARGET_UNUSED,
        ),
        Row(
            "tracing",
            "drain jobs/s, tracing on, every span exported over OTLP/HTTP",
            num(on),
            f"tracing off {num(off)}",
            f"{num(cost, 3)} x; job-worker CPU per job {num(cpu_on, 1)} µs against {num(cpu_off, 1)}",
            "— (its cost, stated)",
            None,
        ),
    ]
