"""The benchmark runs end to end in its quick mode and produces its table (its figures are not checked); its
slow receiver answers late and counts what it holds."""

import asyncio
import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import aio_pika
import asyncpg
import httpx
import pytest
from redis.asyncio import Redis
from standardwebhooks.webhooks import Webhook

from app.core.config import Settings
from bench import costs, scenarios
from bench.receiver import Receiver
from tests.conftest import RABBITMQ_URL, REDIS_URL
from tests.support import ROOT, wait_for

SCENARIOS = (
    "ingest",
    "end-to-end",
    "webhooks",
    "slow_endpoint",
    "metrics_cost",
    "retention",
    "flow",
    "tracing",
    "progress",
    "noisy",
    "workflows",
    "cancel",
    "dlq-groups",
    "overload",
    "scaling",
    "soak",
    "overview",
)
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HEADER = "| scenario | figure | ours | baseline | ratio | target | met? |"


@pytest.mark.slow
@pytest.mark.timeout(930)
def test_quick_bench_writes_a_table_with_every_scenario(tmp_path: Path) -> None:
    output = tmp_path / "bench.md"
    result = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # about 3 minutes on a quiet day; this machine has been three times slower
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    text = output.read_text()
    assert HEADER in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    for scenario in SCENARIOS:
        rows = [line for line in table if re.match(rf"\| {re.escape(scenario)} \|", line)]
        assert rows, f"no row for {scenario} in:\n{text}"
        assert not any("scenario failed" in row for row in rows), rows
    assert text in result.stdout  # printed as well as written
    ratios = json.loads((tmp_path / "bench.json").read_text())["ratios"]  # its headline ratios, saved beside it
    assert {r["key"] for r in ratios} >= {"ingest_32", "batch", "webhooks"}, ratios  # the peers are skipped in --quick
    assert (tmp_path / "bench-ratios.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")  # and drawn


def test_every_scenario_is_registered_in_order_with_quick_sizes_no_larger_than_full() -> None:
    assert tuple(scenarios.SCENARIOS) == SCENARIOS
    assert 0 < scenarios.QUICK.slow_jobs <= scenarios.FULL.slow_jobs
    assert 0 < scenarios.QUICK.overload_seconds <= scenarios.FULL.overload_seconds
    assert scenarios.QUICK.slow_rate > 0 and scenarios.FULL.slow_rate > 0
    assert 0 < scenarios.QUICK.scale_jobs <= scenarios.FULL.scale_jobs
    assert 0 < scenarios.QUICK.prune_jobs <= scenarios.FULL.prune_jobs
    assert 0 < scenarios.QUICK.noisy_jobs <= scenarios.FULL.noisy_jobs
    assert 0 < scenarios.QUICK.workflow_fan_in <= scenarios.FULL.workflow_fan_in
    assert 1 < scenarios.QUICK.workflow_chain <= scenarios.FULL.workflow_chain
    assert 0 < scenarios.QUICK.workflow_submit_jobs <= scenarios.FULL.workflow_submit_jobs <= 500  # a batch's most
    assert 1 < scenarios.QUICK.scale_max_workers <= scenarios.FULL.scale_max_workers
    assert 0 < scenarios.QUICK.cancel_rounds <= scenarios.FULL.cancel_rounds
    assert 0 < scenarios.QUICK.dlq_dead_jobs <= scenarios.FULL.dlq_dead_jobs
    assert 0 < scenarios.QUICK.dlq_calls <= scenarios.FULL.dlq_calls


async def test_a_slow_receiver_verifies_then_answers_late_and_counts_what_it_holds() -> None:
    transport = httpx.ASGITransport(app=Receiver(SECRET, delay=0.3))
    async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as client:
        sends = [
            asyncio.create_task(client.post("/hook", content=body, headers=_signed(n, body))) for n, body in _bodies()
        ]

        async def both_verified() -> dict[str, int] | None:
            records: dict[str, int] = (await client.get("/records")).json()
            return records if records["verified"] == 2 else None

        held = await wait_for(both_verified, within=5, interval=0.01)
        answers = await asyncio.gather(*sends)
        after = (await client.get("/records")).json()
    assert [answer.status_code for answer in answers] == [200, 200]
    assert (held["verified"], held["in_flight"], held["answered"]) == (2, 2, 0)
    assert (after["in_flight"], after["answered"], after["peak_in_flight"], after["rejected"]) == (0, 2, 2, 0)


def _bodies() -> list[tuple[int, bytes]]:
    return [(n, f'{{"type":"job.succeeded","data":{{"job":{{"id":"job-{n}"}}}}}}'.encode()) for n in (1, 2)]


def _signed(n: int, body: bytes) -> dict[str, str]:
    now = datetime.now(UTC)
    signature = Webhook(SECRET).sign(f"msg_{n}", now, body.decode())
    return {"webhook-id": f"msg_{n}", "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": signature}


async def test_the_cost_window_reads_each_services_own_counters(settings: Settings) -> None:
    """Five messages published, delivered and acked, ten rows written and three Redis commands, between the
    window's two reads: each counter saw at least that much (the services are shared: others may add to them)."""
    dsn = settings.database_url.replace("+asyncpg", "")
    window = costs.Window(dsn)
    await window.open()
    assert window.before is not None and {"published", "rows written", "redis commands"} <= set(window.before)
    connection = await aio_pika.connect(RABBITMQ_URL)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(exclusive=True)
        for n in range(5):
            await channel.default_exchange.publish(aio_pika.Message(str(n).encode()), routing_key=queue.name)
        for _ in range(5):
            message = await wait_for(lambda: queue.get(fail=False), within=10)
            await message.ack()
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE TEMP TABLE counted (n int)")
        await conn.executemany("INSERT INTO counted VALUES ($1)", [(n,) for n in range(10)])
    finally:
        await conn.close()
    client = Redis.from_url(REDIS_URL)
    try:
        for n in range(3):
            await client.set(f"{settings.namespace}:cost-window:{n}", n, ex=60)
    finally:
        await client.aclose()
    cost = await window.close(1, {"worker": 0.002}, 1)
    assert cost is not None
    least = {"published": 5, "delivered": 5, "acknowledged": 5, "rows written": 10, "redis commands": 3}
    for name, count in least.items():
        assert (cost.get(name) or 0) >= count, (name, cost.per_job)
    assert cost.get("cpu: worker") == 2.0
