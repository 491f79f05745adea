"""`GET /api/v1/queues`: each queue's place in its topology, the retry tiers added up per topology, and the change
of each depth per second between two reads (no management plugin here; services/test_queue_rates.py adds up
tiers holding messages)."""

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


async def test_queues_have_their_place_and_a_depth_changes_at_a_rate(api: Api, settings: Settings) -> None:
    topology = build_topology(settings)
    dlq = topology.names.webhooks_dlq  # no TTL, and no worker of this test reads it
    probe = await BrokerProbe.connect(RABBITMQ_URL, topology)
    try:
        await probe.purge(dlq)
        first = await queues(api)
        started = time.monotonic()
        for n in range(MESSAGES):
            await probe.channel.default_exchange.publish(aio_pika.Message(str(n).encode()), routing_key=dlq)
        await asyncio.sleep(max(0.0, 1.2 - (time.monotonic() - started)))  # a rate spans a second at least
        second = await queues(api)
    finally:
        await probe.purge(dlq)
        await probe.close()

    items = {item["queue"]: item for item in second["items"]}
    dead = items["webhooks.dlq"]
    assert (dead["topology"], dead["kind"], dead["ready"]) == ("webhooks", "dlq", MESSAGES)
    assert all(item["change_per_second"] is None for item in first["items"]) and first["sampled_over_seconds"] is None
    assert second["sampled_over_seconds"] >= 1.0 and second["rates_from"] == "depths"
    assert dead["change_per_second"] == pytest.approx(MESSAGES / second["sampled_over_seconds"], rel=0.01)
    assert dead["publish_per_second"] is None and dead["deliver_per_second"] is None
    tiers = [item for item in second["items"] if item["kind"] == "retry"]
    assert {(t["topology"], t["feeds"]) for t in tiers} == {
        ("jobs", "jobs.critical"),
        ("jobs", "jobs.default"),
        ("jobs", "jobs.bulk"),
        ("webhooks", "webhooks"),
    }
    for name in ("jobs", "webhooks"):
        assert second["in_retry"][name] == sum(t["ready"] for t in tiers if t["topology"] == name)
    assert (items["jobs.default"]["kind"], items["jobs.default"]["tier"]) == ("queue", None)


async def test_queues_are_for_an_admin(api: Api) -> None:
    answer = await api.client.get("/api/v1/queues", headers=await api.new_client("queues-client"))
    assert answer.status_code == 403 and answer.json()["code"] == "forbidden"
