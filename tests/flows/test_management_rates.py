"""Message rates from the broker (docs/dashboard.md#queues): with RABBITMQ_MANAGEMENT_URL set, each queue of the
namespace has its publish and deliver rates from RabbitMQ's management API; without an answer from it, the rates
are the depths' change alone. Against a RabbitMQ node of the test's own with the management plugin enabled (the
machine's shared broker is never reconfigured)."""

import secrets
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from app.services.queue_rates import QueueRates
from app.services.upkeep.gauges import QueueDepth
from tests.local.cluster import RABBITMQ_BIN, Node
from tests.local.ports import free_port, free_ports
from tests.support import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not RABBITMQ_BIN.exists(), reason="needs the rabbitmq-server package (`.ci/run` has it)"),
]


@pytest.fixture(scope="module")
def management_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, int]]:
    """A node with the management plugin, its statistics collected every half second; its HTTP port."""
    amqp, dist, http = free_ports(3)
    home: Path = tmp_path_factory.mktemp("management")
    conf = f"management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = {http}\ncollect_statistics_interval = 500\n"
    node = Node(f"taskq-mgmt-{uuid.uuid4().hex[:8]}@localhost", amqp, dist, home, ("rabbitmq_management",), conf)
    node.prepare(secrets.token_hex(20))
    try:
        node.start(die_with_parent=True)
        yield node, http
    finally:
        node.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
async def channel(management_node: tuple[Node, int]) -> AsyncIterator[aio_pika.abc.AbstractChannel]:
    connection = await aio_pika.connect_robust(management_node[0].url)
    try:
        yield await connection.channel()
    finally:
        await connection.close()


async def test_each_queue_of_the_namespace_has_its_publish_and_deliver_rates_from_the_management_api(
    management_node: tuple[Node, int], channel: aio_pika.abc.AbstractChannel
) -> None:
    namespace = "mgmt" + uuid.uuid4().hex[:8]
    mine = await channel.declare_queue(f"{namespace}.jobs.default", auto_delete=True)
    other = await channel.declare_queue(f"other{namespace}.jobs.default", auto_delete=True)
    rates = QueueRates(f"http://guest:guest@127.0.0.1:{management_node[1]}")
    depths = [QueueDepth("jobs.default", 0, 0), QueueDepth("jobs.bulk", 0, 0)]

    async def traffic_seen() -> dict[str, Any] | None:
        for queue in (mine, other):
            for _ in range(20):
                await channel.default_exchange.publish(aio_pika.Message(b"{}"), routing_key=queue.name)
        for _ in range(10):
            await mine.get(no_ack=True, fail=False)
        described = await rates.describe(depths, namespace)
        default = described["items"][0]
        return described if default["publish_per_second"] and default["deliver_per_second"] else None

    described = await wait_for(traffic_seen, within=30, interval=0.2)
    assert described["rates_from"] == "management"
    default, bulk = described["items"]
    assert default["queue"] == "jobs.default" and default["publish_per_second"] > default["deliver_per_second"] > 0
    assert (bulk["publish_per_second"], bulk["deliver_per_second"]) == (None, None)  # no such queue on the broker


async def test_without_an_answer_from_the_management_api_the_rates_are_the_depths_change_alone() -> None:
    rates = QueueRates(f"http://guest:guest@127.0.0.1:{free_port()}")  # nothing listens there
    described = await rates.describe([QueueDepth("jobs.default", 3, 1)], "mgmt")
    assert described["rates_from"] == "depths"
    assert (described["items"][0]["publish_per_second"], described["items"][0]["deliver_per_second"]) == (None, None)
