"""`GET /api/v1/queues`: each queue's place in its topology, the retry tiers added up per topology, and the change
of each depth per second between two reads (no management plugin here)."""

import asyncio
import time
from typing import Any

import aio_pika
import pytest

from app.core.config import Settings
from app.core.topology import build_topology
from tests.conftest import RABBITMQ_URL
from tests.support import Api, BrokerProbe

MESSAGES = 12


async def queues(api: Api) -> dict[str, Any]:
    answer = await api.client.get("/api/v1/queues", headers=api.admin)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def test_retry_tiers_add_up_per_topology_and_depths_change_at_a_rate(api: Api, settings: Settings) -> None:
    topology = build_topology(settings)
    longest = max(topology.webhook_tiers, key=lambda tier: tier.ttl_ms)  # its messages stay for the test's length
    tier_queue = topology.names.webhook_tier_queue(longest)
    name = tier_queue.removeprefix(f"{settings.namespace}.")
    probe = await BrokerProbe.connect(RABBITMQ_URL, topology)
    try:
        await probe.purge(tier_queue)
        first = await queues(api)
        started = time.monotonic()
        for n in range(MESSAGES):
            await probe.channel.default_exchange.publish(aio_pika.Message(str(n).encode()), routing_key=tier_queue)
        await asyncio.sleep(max(0.0, 1.2 - (time.monotonic() - started)))  # a rate spans a second at least
        second = await queues(api)
    finally:
        await probe.purge(tier_queue)
        await probe.close()

    items = {item["queue"]: item for item in second["items"]}
    tier = items[name]
    assert (tier["topology"], tier["kind"], tier["feeds"], tier["tier"]) == (
        "webhooks",
        "retry",
        "webhooks",
        f"{longest.ttl_ms}ms",
    )
    assert tier["ready"] == MESSAGES
    for topology_name in ("jobs", "webhooks"):
        in_tiers = [i["ready"] for i in second["items"] if i["kind"] == "retry" and i["topology"] == topology_name]
        assert second["in_retry"][topology_name] == sum(in_tiers)
    assert items["jobs.default"]["kind"] == "queue" and items["jobs.dlq"]["kind"] == "dlq"
    assert {i["feeds"] for i in second["items"] if i["kind"] == "retry" and i["topology"] == "jobs"} >= {
        "jobs.critical",
        "jobs.default",
        "jobs.bulk",
    }
    assert all(item["change_per_second"] is None for item in first["items"]) and first["sampled_over_seconds"] is None
    assert second["sampled_over_seconds"] >= 1.0 and second["rates_from"] == "depths"
    assert tier["change_per_second"] == pytest.approx(MESSAGES / second["sampled_over_seconds"], rel=0.01)
    assert tier["publish_per_second"] is None and tier["deliver_per_second"] is None


async def test_queues_are_for_an_admin(api: Api) -> None:
    answer = await api.client.get("/api/v1/queues", headers=await api.new_client("queues-client"))
    assert answer.status_code == 403 and answer.json()["code"] == "forbidden"
