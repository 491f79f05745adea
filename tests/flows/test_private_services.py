"""A test of an outage stops a RabbitMQ node and a Redis of its own: the machine's, which other runs share, answer
all along, and the private ones are gone afterwards, processes and files, also when the test failed."""

from pathlib import Path

import aio_pika
import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.conftest import NS, RABBITMQ_URL, REDIS_URL
from tests.local.cluster import Node
from tests.local.private_services import running_rabbit, running_redis
from tests.support import rabbitmq_stopped, redis_stopped

pytestmark = pytest.mark.slow


async def amqp_answers(url: str) -> bool:
    try:
        connection = await aio_pika.connect(url, timeout=10)
    except (OSError, aio_pika.exceptions.AMQPConnectionError):
        return False
    await connection.close()
    return True


async def redis_answers(url: str) -> bool:
    client = Redis.from_url(url, socket_connect_timeout=5)
    try:
        return bool(await client.ping())
    except (OSError, RedisConnectionError):
        return False
    finally:
        await client.aclose()


def running(pid: int) -> bool:
    try:  # a process reaped between a look and the read is gone
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


async def test_an_outage_stops_only_private_services_which_are_removed_even_when_the_test_fails(
    tmp_path: Path,
) -> None:
    rabbit_folder, redis_folder = tmp_path / "rabbit", tmp_path / "redis"
    with (
        pytest.raises(RuntimeError, match="the test failed here"),
        running_rabbit(rabbit_folder, prefix=NS) as rabbit,
        running_redis(redis_folder) as redis,
    ):
        assert await amqp_answers(rabbit.url) and await redis_answers(redis.url)
        rabbit_vm = int((rabbit.node.home / "node.pid").read_text())
        with rabbitmq_stopped(rabbit), redis_stopped(redis):
            assert not await amqp_answers(rabbit.url)
            assert not await redis_answers(redis.url)
            assert await amqp_answers(RABBITMQ_URL), "the shared RabbitMQ stopped answering"
            assert await redis_answers(REDIS_URL), "the shared Redis stopped answering"
            raise RuntimeError("the test failed here")
    assert not running(rabbit_vm)
    assert redis.process is not None and redis.process.poll() is not None  # the one started again after the outage
    assert not rabbit_folder.exists() and not redis_folder.exists()


@pytest.mark.parametrize(("name", "port"), [("rabbit@localhost", 25999), ("taskq-x@localhost", 5672)])
def test_no_node_a_test_runs_can_be_the_machines_own(name: str, port: int, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="machine's own RabbitMQ node"):
        Node(name, port, 25998, tmp_path)
