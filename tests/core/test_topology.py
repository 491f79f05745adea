"""The declared topology: harmless to declare twice, every queue with the arguments the design names."""

import asyncio
import json

import aio_pika
import pytest
from loguru import logger

from app.core.backoff import job_tiers
from app.core.broker import Broker, Outgoing, PublishError
from app.core.names import Lane, lane_max_priority
from app.core.topology import ADDED_LATER, TopologyMismatch, build_topology, declare
from tests.conftest import NS, RABBITMQ_URL, make_settings, remove_namespace
from tests.support import BrokerProbe, rabbitmqctl_json, wait_for


async def test_declaring_twice_is_harmless() -> None:
    topology = build_topology(make_settings())
    connection = await aio_pika.connect(RABBITMQ_URL)
    async with connection:
        channel = await connection.channel()
        await declare(channel, topology)
        await declare(channel, topology)
        assert not channel.is_closed


def _broker_queues() -> dict[str, dict[str, object]]:
    queues = {}
    for row in rabbitmqctl_json("list_queues", "name", "durable", "arguments"):
        arguments = row["arguments"]  # [name, type, value] triples in this format
        row["arguments"] = {arg[0]: arg[-1] for arg in arguments}
        queues[row["name"]] = row
    return queues


async def test_every_queue_has_the_arguments_the_design_names(broker: BrokerProbe) -> None:
    settings = make_settings()
    topology = build_topology(settings)
    names = topology.names
    queues = await asyncio.to_thread(_broker_queues)
    for spec in topology.queues:
        assert queues[spec.name]["durable"] is True, spec.name
        assert queues[spec.name]["arguments"] == spec.arguments, spec.name
    for lane in Lane:
        args = queues[names.lane_queue(lane)]["arguments"]
        assert args == {
            "x-queue-type": "classic",
            "x-dead-letter-exchange": names.jobs_dlx,
            "x-max-priority": lane_max_priority(lane),
            "x-queue-mode": "lazy",
        }
        for tier in job_tiers(settings.retry_base_delay, settings.retry_max_delay):
            assert queues[names.job_tier_queue(lane, tier)]["arguments"] == {
                "x-queue-type": "classic",
                "x-message-ttl": tier.ttl_ms,
                "x-dead-letter-exchange": names.jobs_exchange,
                "x-dead-letter-routing-key": str(lane),
            }
    assert [t.delay for t in topology.job_tiers] == [0.2, 0.4, 0.8, 1.6]
    assert names.webhooks_dlq in queues and names.jobs_dlq in queues


async def test_a_lane_an_earlier_version_declared_is_taken_as_it_is_and_the_operator_told_how_to_change_it() -> None:
    """Lanes became lazy in a later version; the broker will not change a queue's arguments in place, so a lane
    declared before keeps its arguments, and the process says so instead of refusing to start."""
    settings = make_settings(namespace=f"{NS}-earlier")
    topology = build_topology(settings)
    lane = topology.names.lane_queue(Lane.DEFAULT)
    spec = next(q for q in topology.queues if q.name == lane)
    earlier = {k: v for k, v in spec.arguments.items() if k not in ADDED_LATER}
    assert earlier != spec.arguments
    warnings: list[str] = []
    sink = logger.add(lambda message: warnings.append(str(message)), level="WARNING")
    connection = await aio_pika.connect(RABBITMQ_URL)
    try:
        async with connection:
            channel = await connection.channel(publisher_confirms=True)
            await channel.declare_queue(lane, durable=True, arguments=earlier)
            await declare(channel, topology)
            # The channel declare reopened is the one the process goes on with: bound and publishing.
            exchange = await channel.get_exchange(topology.names.jobs_exchange, ensure=False)
            await exchange.publish(aio_pika.Message(b"after"), routing_key=topology.names.lane_key(Lane.DEFAULT))
            message = await (await channel.get_queue(lane, ensure=False)).get(timeout=5)
            assert message.body == b"after"
            await message.ack()
    finally:
        logger.remove(sink)
        await remove_namespace(settings)
    assert [w for w in warnings if lane in w and "set_policy" in w and "x-queue-mode" in w] != [], warnings


async def test_a_queue_whose_other_arguments_differ_is_still_refused() -> None:
    settings = make_settings(namespace=f"{NS}-other")
    topology = build_topology(settings)
    lane = topology.names.lane_queue(Lane.DEFAULT)
    connection = await aio_pika.connect(RABBITMQ_URL)
    try:
        async with connection:
            channel = await connection.channel()
            await channel.declare_queue(lane, durable=True, arguments={"x-queue-type": "classic"})
            with pytest.raises(TopologyMismatch, match=f"The queue {lane} exists on RabbitMQ with other arguments"):
                await declare(channel, topology)
    finally:
        await remove_namespace(settings)


async def test_a_delay_tier_returns_its_message_to_the_lane(broker: BrokerProbe) -> None:
    topology = build_topology(make_settings())
    names, tier = topology.names, topology.job_tiers[0]
    lane = names.lane_queue(Lane.BULK)
    await broker.purge(lane)
    publisher = Broker(RABBITMQ_URL, topology, 2, name="test-tier")
    await publisher.start(wait=10)
    try:
        queue = names.job_tier_queue(Lane.BULK, tier)
        await publisher.publish(Outgoing(names.jobs_retry_exchange, queue, b"{}", message_id="tier-trip"))

        async def back_in_lane() -> int:
            return await broker.depth(lane)

        await wait_for(back_in_lane, within=10)
        assert [m.message_id for m in await broker.take_all(lane)] == ["tier-trip"]
    finally:
        await publisher.close()


async def test_an_unroutable_publish_is_an_error_not_a_loss() -> None:
    topology = build_topology(make_settings())
    publisher = Broker(RABBITMQ_URL, topology, 2, name="test-mandatory")
    await publisher.start(wait=10)
    try:
        with pytest.raises(PublishError):
            await publisher.publish(Outgoing(topology.names.jobs_exchange, "no-such-lane", b"{}"))
    finally:
        await publisher.close()


def _event_bindings(queue: str, exchange: str) -> set[str]:
    rows = rabbitmqctl_json("list_bindings", "source_name", "destination_name", "routing_key")
    return {b["routing_key"] for b in rows if b["source_name"] == exchange and b["destination_name"] == queue}


async def test_only_subscribable_events_reach_the_fan_out_and_the_rest_publish_without_error(
    broker: BrokerProbe,
) -> None:
    topology = build_topology(make_settings())
    names = topology.names
    bound = await asyncio.to_thread(_event_bindings, names.webhook_events_queue, names.events_exchange)
    assert bound == {
        "job.*.succeeded",
        "job.*.dead_lettered",
        "job.*.retrying",
        "job.*.cancelled",
        "job.*.progress",
        "workflow.*",
    }
    publisher = Broker(RABBITMQ_URL, topology, publish_timeout=5, name="test-events")
    await publisher.start(wait=10)
    try:
        await broker.purge(names.webhook_events_queue)
        # Published/subscribe (rule 1): nobody binds `running`, yet the publish is confirmed, not returned.
        for status in ("running", "succeeded"):
            body = json.dumps({"type": f"job.{status}"}).encode()
            await publisher.publish(
                Outgoing(names.events_exchange, names.event_key("echo", status), body, mandatory=False)
            )
        await wait_for(lambda: _depth_is(broker, names.webhook_events_queue, 1), within=10)
        (only,) = await broker.take_all(names.webhook_events_queue)
        assert json.loads(only.body) == {"type": "job.succeeded"}
    finally:
        await publisher.close()


async def _depth_is(broker: BrokerProbe, queue: str, count: int) -> bool:
    return await broker.depth(queue) == count
